//===- Convolution.cpp - tfm.conv2d on the oneDNN convolution kernel ------===//

#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::populateCPUConvolutionLowerings(OpLoweringSet &set) {
  set.add<Conv2DOp>([](Conv2DOp op, BufferizedEntry &be) {
    auto &e = cast<CPUEntry>(be);
    // Other element types, and empty tensors, take the generic loops.
    if (!isF32(op.getType()) || op.getType().getNumElements() == 0 ||
        op.getInput().getType().getNumElements() == 0) {
      lowerGenericConv2D(e, op);
      return success();
    }
    ArrayRef<int64_t> x = op.getInput().getType().getShape();
    ArrayRef<int64_t> w = op.getWeight().getType().getShape();
    ArrayRef<int64_t> st = op.getStrides(), dil = op.getDilations(),
                      pads = op.getPads();
    Value bias = op.getBias() ? e.denseOf(op.getBias()) : Value();
    int64_t params[TFM_CONV_2D_NUM_PARAMS] = {};
    params[TFM_CONV_2D_N] = x[0];
    params[TFM_CONV_2D_C] = x[1];
    params[TFM_CONV_2D_H] = x[2];
    params[TFM_CONV_2D_W] = x[3];
    params[TFM_CONV_2D_M] = w[0];
    params[TFM_CONV_2D_KH] = w[2];
    params[TFM_CONV_2D_KW] = w[3];
    params[TFM_CONV_2D_GROUPS] = static_cast<int64_t>(op.getGroup());
    e.callKernel(TFM_KERNEL_CONV_2D, params, {},
                 {KernelArg(e.denseOf(op.getInput())),
                  KernelArg(e.denseOf(op.getWeight())), KernelArg(bias),
                  KernelArg(e.destination(op.getResult()))},
                 {st[0], st[1], dil[0], dil[1], pads[0], pads[1], pads[2],
                  pads[3], bias ? 1 : 0});
    return success();
  });
}
