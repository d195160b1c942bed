//===- Reorder.cpp - REORDER on oneDNN's reorder ---------------------------===//

#include "Engine.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

using namespace tfm::runtime::cpu;
using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

class ReorderKernel : public Kernel {
public:
  ReorderKernel(std::shared_ptr<Engine> dev, const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)) {
    int64_t rank = d.params[TFM_REORDER_RANK];
    memory::dims dims(d.params + TFM_REORDER_DIMS,
                      d.params + TFM_REORDER_DIMS + rank);
    memory::desc from(dims, dt::f32, memory::dims(d.strides, d.strides + rank));
    memory::desc to(dims, dt::f32,
                    memory::dims(d.strides + TFM_REORDER_MAX_RANK,
                                 d.strides + TFM_REORDER_MAX_RANK + rank));
    auto &eng = this->dev->engine;
    x = memory(from, eng, DNNL_MEMORY_NONE);
    y = memory(to, eng, DNNL_MEMORY_NONE);
    prim = dnnl::reorder(x, y);
  }
  int32_t run(void *const *args) override {
    x.set_data_handle(args[0]);
    y.set_data_handle(args[1]);
    prim.execute(dev->stream, x, y);
    dev->stream.wait();
    return 0;
  }

private:
  std::shared_ptr<Engine> dev;
  memory x, y;
  dnnl::reorder prim;
};

} // namespace

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeReorderKernel(std::shared_ptr<Engine> engine,
                                     const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<ReorderKernel>(std::move(engine), d);
}
