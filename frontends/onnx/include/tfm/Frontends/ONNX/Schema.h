//===- Schema.h - ONNX nodes against their op schemas -----------*- C++ -*-===//

#ifndef TFM_FRONTENDS_ONNX_SCHEMA_H
#define TFM_FRONTENDS_ONNX_SCHEMA_H

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace mlir::tfm::onnx_io {

/// What `node` breaks of its op's schema at `opset`, one message each:
/// input and output counts, required inputs left empty, attributes of the
/// wrong type, unknown or missing. Converters rely on the schema, so a node
/// that breaks it must not reach them. Nothing for an op without a schema.
std::vector<std::string> schemaProblems(const onnx::NodeProto &node,
                                        int64_t opset);

} // namespace mlir::tfm::onnx_io

#endif // TFM_FRONTENDS_ONNX_SCHEMA_H
