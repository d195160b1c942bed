//===- FuzzTensorProto.cpp - The TensorProto reader on any bytes -----------===//
//
// What `tfmc run --input` and `--test-data-dir` read: any bytes must give a
// tensor or an error, never a crash or an allocation the bytes do not
// justify.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontends/ONNX/TensorProto.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::tfm::onnx_io::NamedTensor tensor;
  std::string error;
  (void)mlir::tfm::onnx_io::parseTensorProto(
      std::string(reinterpret_cast<const char *>(data), size), tensor, error);
  return 0;
}
