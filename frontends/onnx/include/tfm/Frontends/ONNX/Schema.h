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
/// `opset` is the version of the node's domain (com.microsoft's ops have
/// an arity table of their own).
std::vector<std::string> schemaProblems(const onnx::NodeProto &node,
                                        int64_t opset);

/// The oldest and newest default-domain opsets the importer reads. Opsets
/// below kFirstNativeOpset are upgraded by the ONNX library's version
/// converter; those above the library's own newest (17 for Debian's ONNX
/// 1.12) are handled by the converters themselves.
constexpr int64_t kOldestOpset = 7;
constexpr int64_t kFirstNativeOpset = 13;
constexpr int64_t kNewestOpset = 21;

/// The attribute that carries an opset 1-12 Softmax or LogSoftmax axis
/// through the version converter, whose adapter needs a rank that shape
/// inference often cannot find; the importer, which knows every shape,
/// applies the old "flatten at axis" meaning from it.
constexpr const char *kLegacySoftmaxAxis = "tfm.legacy_axis";

/// Upgrades `model` to `target` with the ONNX library's version converter.
/// Returns false and sets `error` (the library's own message) when it
/// cannot; never throws.
bool convertOpset(onnx::ModelProto &model, int target, std::string &error);

} // namespace mlir::tfm::onnx_io

#endif // TFM_FRONTENDS_ONNX_SCHEMA_H
