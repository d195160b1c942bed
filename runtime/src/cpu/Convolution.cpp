//===- Convolution.cpp - The 2-D convolution kernel -------------------------===//
//
// oneDNN's convolution on the plain layouts the compiled code keeps (NCHW
// activations, OIHW or GOIHW weights); oneDNN picks the implementation.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"

using namespace tfm::runtime::cpu;
using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

class Conv2DKernel : public Kernel {
public:
  Conv2DKernel(std::shared_ptr<Engine> dev, const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)) {
    const int64_t *p = d.params, *s = d.strides;
    int64_t n = p[TFM_CONV_2D_N], c = p[TFM_CONV_2D_C], h = p[TFM_CONV_2D_H],
            w = p[TFM_CONV_2D_W], m = p[TFM_CONV_2D_M],
            kh = p[TFM_CONV_2D_KH], kw = p[TFM_CONV_2D_KW],
            g = p[TFM_CONV_2D_GROUPS];
    int64_t oh = (h + s[4] + s[6] - s[2] * (kh - 1) - 1) / s[0] + 1;
    int64_t ow = (w + s[5] + s[7] - s[3] * (kw - 1) - 1) / s[1] + 1;
    hasBias = s[8];
    src = memory::desc({n, c, h, w}, dt::f32, tag::nchw);
    dst = memory::desc({n, m, oh, ow}, dt::f32, tag::nchw);
    weights = g > 1 ? memory::desc({g, m / g, c / g, kh, kw}, dt::f32,
                                   tag::goihw)
                    : memory::desc({m, c, kh, kw}, dt::f32, tag::oihw);
    bias = hasBias ? memory::desc({m}, dt::f32, tag::x) : memory::desc();
    // oneDNN counts dilation from 0 (a dense kernel has dilation 0).
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference,
        dnnl::algorithm::convolution_direct, src, weights, bias, dst,
        {s[0], s[1]}, {s[2] - 1, s[3] - 1}, {s[4], s[5]}, {s[6], s[7]});
    prim = dnnl::convolution_forward(
        dnnl::convolution_forward::primitive_desc(desc, this->dev->engine));
  }

  int32_t run(void *const *args) override {
    std::unordered_map<int, memory> io = {
        {DNNL_ARG_SRC, memory(src, dev->engine, args[0])},
        {DNNL_ARG_WEIGHTS, memory(weights, dev->engine, args[1])},
        {DNNL_ARG_DST, memory(dst, dev->engine, args[3])}};
    if (hasBias)
      io.emplace(DNNL_ARG_BIAS, memory(bias, dev->engine, args[2]));
    prim.execute(dev->stream, io);
    dev->stream.wait();
    return 0;
  }

private:
  std::shared_ptr<Engine> dev;
  bool hasBias;
  memory::desc src, weights, bias, dst;
  dnnl::convolution_forward prim;
};

} // namespace

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeConv2DKernel(std::shared_ptr<Engine> engine,
                                    const tfm_abi_kernel_desc_t &desc) {
  return std::make_unique<Conv2DKernel>(std::move(engine), desc);
}
