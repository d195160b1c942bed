//===- Engine.h - The oneDNN engine a session's kernels share ---*- C++ -*-===//

#ifndef TFM_RUNTIME_SRC_CPU_ENGINE_H
#define TFM_RUNTIME_SRC_CPU_ENGINE_H

#include "Kernels.h"
#include "VectorIsa.h"

#include <dnnl.hpp>

namespace tfm::runtime::cpu {

class Engine {
public:
  Engine() : engine(dnnl::engine::kind::cpu, 0), stream(engine) {}
  dnnl::engine engine;
  dnnl::stream stream;
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
