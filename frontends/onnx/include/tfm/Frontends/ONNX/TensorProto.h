//===- TensorProto.h - Host tensors to and from ONNX TensorProto -*- C++ -*-===//
//
// The ONNX backend-test layout (`input_N.pb`, `output_N.pb`) stores one
// serialized TensorProto per file; tfmc reads inputs and expected outputs in
// it and writes outputs in it.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTENDS_ONNX_TENSORPROTO_H
#define TFM_FRONTENDS_ONNX_TENSORPROTO_H

#include "tfm/Reference/Tensor.h"

#include <string>
#include <vector>

namespace mlir::tfm::onnx_io {

/// A tensor and the name its file gives it (possibly empty).
struct NamedTensor {
  std::string name;
  reference::Tensor tensor;
};

/// Parses a serialized TensorProto from `bytes`. On failure returns false and
/// sets `error` to one line that names what is wrong.
bool parseTensorProto(const std::string &bytes, NamedTensor &out,
                      std::string &error);

/// Reads a `.pb` file holding one TensorProto.
bool readTensorProtoFile(const std::string &path, NamedTensor &out,
                         std::string &error);

/// Writes `tensor` as a TensorProto of its own element type, rounding values
/// to that type.
bool writeTensorProtoFile(const std::string &path, const NamedTensor &tensor,
                          std::string &error);

/// Copies the ONNX model at `inPath` to `outPath` with the initializers
/// named in `values` replaced (each keeps its name, element type and
/// shape), writing atomically. Fails, naming it, on an initializer that is
/// missing or does not match.
bool writeModelWithInitializers(const std::string &inPath,
                                const std::string &outPath,
                                const std::vector<NamedTensor> &values,
                                std::string &error);

/// IEEE half and bfloat16 conversions (round to nearest even on the way in).
double halfBitsToDouble(uint16_t bits);
uint16_t doubleToHalfBits(double value);
double bf16BitsToDouble(uint16_t bits);
uint16_t doubleToBf16Bits(double value);

} // namespace mlir::tfm::onnx_io

#endif // TFM_FRONTENDS_ONNX_TENSORPROTO_H
