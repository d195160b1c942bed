//===- Schema.cpp - ONNX nodes against their op schemas -------------------===//
//
// Plain C++ with exceptions, as the ONNX library's schema headers need.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontends/ONNX/Schema.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <limits>

namespace {

const char *attributeTypeName(int type) {
  switch (type) {
  case onnx::AttributeProto::FLOAT: return "a float";
  case onnx::AttributeProto::INT: return "an int";
  case onnx::AttributeProto::STRING: return "a string";
  case onnx::AttributeProto::TENSOR: return "a tensor";
  case onnx::AttributeProto::GRAPH: return "a graph";
  case onnx::AttributeProto::FLOATS: return "floats";
  case onnx::AttributeProto::INTS: return "ints";
  case onnx::AttributeProto::STRINGS: return "strings";
  case onnx::AttributeProto::TENSORS: return "tensors";
  case onnx::AttributeProto::GRAPHS: return "graphs";
  default: return "an unknown type";
  }
}

} // namespace

std::vector<std::string>
mlir::tfm::onnx_io::schemaProblems(const onnx::NodeProto &node,
                                   int64_t opset) {
  std::vector<std::string> problems;
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      node.op_type(), static_cast<int>(opset), "");
  if (!schema)
    return problems;
  auto range = [](int lo, int hi) {
    if (lo == hi)
      return std::to_string(lo);
    if (hi == std::numeric_limits<int>::max())
      return "at least " + std::to_string(lo);
    return std::to_string(lo) + " to " + std::to_string(hi);
  };
  int inputs = node.input_size(), outputs = node.output_size();
  if (inputs < schema->min_input() || inputs > schema->max_input())
    problems.push_back("has " + std::to_string(inputs) +
                       (inputs == 1 ? " input" : " inputs") + ", but " +
                       node.op_type() + " (opset " + std::to_string(opset) +
                       ") takes " +
                       range(schema->min_input(), schema->max_input()));
  if (outputs < schema->min_output() || outputs > schema->max_output())
    problems.push_back("has " + std::to_string(outputs) +
                       (outputs == 1 ? " output" : " outputs") + ", but " +
                       node.op_type() + " (opset " + std::to_string(opset) +
                       ") gives " +
                       range(schema->min_output(), schema->max_output()));
  const auto &formal = schema->inputs();
  for (int i = 0; i < inputs && i < static_cast<int>(formal.size()); ++i)
    if (node.input(i).empty() &&
        formal[i].GetOption() == onnx::OpSchema::Single)
      problems.push_back("leaves its required input " + std::to_string(i) +
                         " ('" + formal[i].GetName() + "') empty");
  const auto &known = schema->attributes();
  for (const onnx::AttributeProto &a : node.attribute()) {
    auto it = known.find(a.name());
    if (it == known.end()) {
      problems.push_back("has the attribute '" + a.name() + "', which " +
                         node.op_type() + " does not take");
      continue;
    }
    if (a.type() != it->second.type)
      problems.push_back("gives its attribute '" + a.name() + "' as " +
                         attributeTypeName(a.type()) + "; it must be " +
                         attributeTypeName(it->second.type));
  }
  for (const auto &[name, attr] : known) {
    if (!attr.required)
      continue;
    bool given = std::any_of(node.attribute().begin(), node.attribute().end(),
                             [&](const auto &a) { return a.name() == name; });
    if (!given)
      problems.push_back("lacks its required attribute '" + name + "'");
  }
  return problems;
}
