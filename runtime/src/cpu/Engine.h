//===- Engine.h - The oneDNN engine a session's kernels share ---*- C++ -*-===//

#ifndef TFM_RUNTIME_SRC_CPU_ENGINE_H
#define TFM_RUNTIME_SRC_CPU_ENGINE_H

#include "Kernels.h"
#include "VectorIsa.h"

#include <dnnl.hpp>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace tfm::runtime::cpu {

class Engine {
public:
  Engine() : engine(dnnl::engine::kind::cpu, 0), stream(engine) {}
  dnnl::engine engine;
  dnnl::stream stream;

  /// What a kernel derives from a constant tensor at `tensor` in the form
  /// `layout` names (packed weights), made by `make` once for all of the
  /// session's kernels that ask: a decoder's prompt and step read each
  /// weight through two kernels, which had packed it twice.
  std::shared_ptr<void> derived(const void *tensor, const std::string &layout,
                                const std::function<std::shared_ptr<void>()> &make) {
    std::lock_guard<std::mutex> lock(derivedMutex);
    std::shared_ptr<void> &slot = derivedForms[{tensor, layout}];
    if (!slot)
      slot = make();
    return slot;
  }

private:
  std::mutex derivedMutex;
  std::map<std::pair<const void *, std::string>, std::shared_ptr<void>>
      derivedForms;
};

/// A dense row-major f32 descriptor of rank 1 to 3.
inline dnnl::memory::desc rowMajor(dnnl::memory::dims dims) {
  using tag = dnnl::memory::format_tag;
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32,
                            dims.size() == 1   ? tag::a
                            : dims.size() == 2 ? tag::ab
                                               : tag::abc);
}

} // namespace tfm::runtime::cpu

#endif // TFM_RUNTIME_SRC_CPU_ENGINE_H
