//===- Schema.cpp - ONNX nodes against their op schemas -------------------===//
//
// Plain C++ with exceptions, as the ONNX library's schema headers need.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontends/ONNX/Schema.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <map>
#include <set>
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

/// Ops whose inputs or attributes changed after opset 17, the newest the
/// ONNX library here knows, or that it does not know at all: the opset of
/// the change and the arity from then on. At or past it the library's older
/// schema would reject valid nodes (ReduceMean's axes input, Split's
/// num_outputs), so the importer checks such nodes' arity from this table
/// and their attributes in the converters.
struct LaterSchema {
  const char *op;
  int since, minIn, maxIn, minOut, maxOut;
};
constexpr int kMany = std::numeric_limits<int>::max();
constexpr LaterSchema kLaterSchemas[] = {
    {"ReduceMean", 18, 1, 2, 1, 1},      {"ReduceMax", 18, 1, 2, 1, 1},
    {"ReduceMin", 18, 1, 2, 1, 1},       {"ReduceProd", 18, 1, 2, 1, 1},
    {"ReduceL1", 18, 1, 2, 1, 1},        {"ReduceL2", 18, 1, 2, 1, 1},
    {"ReduceLogSum", 18, 1, 2, 1, 1},    {"ReduceLogSumExp", 18, 1, 2, 1, 1},
    {"ReduceSumSquare", 18, 1, 2, 1, 1}, {"Split", 18, 1, 2, 1, kMany},
    {"Pad", 18, 2, 4, 1, 1},             {"Resize", 18, 1, 4, 1, 1},
    {"ScatterND", 18, 3, 3, 1, 1},       {"ScatterElements", 18, 3, 3, 1, 1},
    {"LpPool", 18, 1, 1, 1, 1},          {"AveragePool", 19, 1, 1, 1, 1},
    {"Cast", 19, 1, 1, 1, 1},            {"CastLike", 19, 2, 2, 1, 1},
    {"DeformConv", 19, 3, 5, 1, 1},      {"Gelu", 20, 1, 1, 1, 1},
    {"GroupNormalization", 18, 3, 3, 1, 1},
    {"QuantizeLinear", 19, 2, 3, 1, 1},  {"DequantizeLinear", 19, 2, 3, 1, 1},
    {"QLinearMatMul", 21, 8, 8, 1, 1}};

/// The com.microsoft ops the importer converts, which the ONNX library does
/// not know at all (version 1 of the domain): their arity.
constexpr LaterSchema kMicrosoftSchemas[] = {
    {"MatMulNBits", 1, 3, 6, 1, 1},
    {"MatMulIntegerToFloat", 1, 4, 7, 1, 1},
    {"DynamicQuantizeMatMul", 1, 3, 5, 1, 1},
    {"GatherBlockQuantized", 1, 3, 4, 1, 1}};

const LaterSchema *laterSchema(const onnx::NodeProto &node, int64_t opset) {
  if (node.domain() == "com.microsoft") {
    for (const LaterSchema &s : kMicrosoftSchemas)
      if (node.op_type() == s.op && opset >= s.since)
        return &s;
    return nullptr;
  }
  for (const LaterSchema &s : kLaterSchemas)
    if (node.op_type() == s.op && opset >= s.since)
      return &s;
  return nullptr;
}

std::string arityRange(int lo, int hi) {
  if (lo == hi)
    return std::to_string(lo);
  if (hi == std::numeric_limits<int>::max())
    return "at least " + std::to_string(lo);
  return std::to_string(lo) + " to " + std::to_string(hi);
}

/// Input and output counts against [minIn, maxIn] and [minOut, maxOut].
void checkArity(const onnx::NodeProto &node, int64_t opset, int minIn,
                int maxIn, int minOut, int maxOut,
                std::vector<std::string> &problems) {
  int inputs = node.input_size(), outputs = node.output_size();
  if (inputs < minIn || inputs > maxIn)
    problems.push_back("has " + std::to_string(inputs) +
                       (inputs == 1 ? " input" : " inputs") + ", but " +
                       node.op_type() + " (opset " + std::to_string(opset) +
                       ") takes " + arityRange(minIn, maxIn));
  if (outputs < minOut || outputs > maxOut)
    problems.push_back("has " + std::to_string(outputs) +
                       (outputs == 1 ? " output" : " outputs") + ", but " +
                       node.op_type() + " (opset " + std::to_string(opset) +
                       ") gives " + arityRange(minOut, maxOut));
}

} // namespace

/// The first node of `graph` or its subgraphs without outputs, or null.
/// Every ONNX op has one; the converter dereferences a missing one (a node
/// of an unknown type and no outputs crashed it: found by fuzzing).
static const onnx::NodeProto *nodeWithoutOutputs(const onnx::GraphProto &graph) {
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.output_size() == 0)
      return &node;
    for (const onnx::AttributeProto &a : node.attribute()) {
      if (a.has_g())
        if (const onnx::NodeProto *n = nodeWithoutOutputs(a.g()))
          return n;
      for (const onnx::GraphProto &g : a.graphs())
        if (const onnx::NodeProto *n = nodeWithoutOutputs(g))
          return n;
    }
  }
  return nullptr;
}

bool mlir::tfm::onnx_io::convertOpset(onnx::ModelProto &model, int target,
                                      std::string &error) {
  if (const onnx::NodeProto *node = nodeWithoutOutputs(model.graph())) {
    error = "node '" + node->name() + "' (" + node->op_type() +
            ") has no outputs";
    return false;
  }
  // Nor does the converter look before it follows a graph output to the
  // value it names (also found by fuzzing).
  std::set<std::string> defined;
  for (const onnx::ValueInfoProto &v : model.graph().input())
    defined.insert(v.name());
  for (const onnx::TensorProto &t : model.graph().initializer())
    defined.insert(t.name());
  for (const onnx::NodeProto &node : model.graph().node())
    defined.insert(node.output().begin(), node.output().end());
  for (const onnx::ValueInfoProto &v : model.graph().output())
    if (!defined.count(v.name())) {
      error = "the graph output '" + v.name() +
              "' is no input, initializer or node output";
      return false;
    }
  for (onnx::NodeProto &node : *model.mutable_graph()->mutable_node()) {
    if (node.op_type() != "Softmax" && node.op_type() != "LogSoftmax")
      continue;
    int64_t axis = 1;
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == "axis")
        axis = a.i();
    // Last-axis softmax means the same before and after opset 13.
    if (axis == -1)
      continue;
    onnx::AttributeProto *legacy = node.add_attribute();
    legacy->set_name(kLegacySoftmaxAxis);
    legacy->set_type(onnx::AttributeProto::INT);
    legacy->set_i(axis);
    for (onnx::AttributeProto &a : *node.mutable_attribute())
      if (a.name() == "axis")
        a.set_i(-1);
  }
  // The converter's in-memory graph drops external data references, and no
  // adapter reads an initializer's values, so the references are set aside
  // and put back by name (the data itself is never loaded here).
  std::map<std::string, onnx::TensorProto> external;
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    onnx::TensorProto &saved = external[t.name()];
    saved.mutable_external_data()->Swap(t.mutable_external_data());
    t.clear_data_location();
  }
  try {
    // Some adapters (Softmax 12 -> 13) need the rank of their input.
    // Data propagation carries the ranks through the exporters' shape
    // subgraphs (Shape, Gather, Concat into Reshape) when axes are dynamic.
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions(/*check_type=*/false, /*error_mode=*/0,
                                    /*data_prop=*/true));
    model = onnx::version_conversion::ConvertVersion(model, target);
    for (onnx::TensorProto &t :
         *model.mutable_graph()->mutable_initializer()) {
      auto it = external.find(t.name());
      if (it == external.end())
        continue;
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      t.mutable_external_data()->Swap(it->second.mutable_external_data());
    }
    return true;
  } catch (const std::exception &e) {
    error = e.what();
  } catch (...) {
    error = "an unknown error in the ONNX version converter";
  }
  return false;
}

std::vector<std::string>
mlir::tfm::onnx_io::schemaProblems(const onnx::NodeProto &node,
                                   int64_t opset) {
  std::vector<std::string> problems;
  if (const LaterSchema *later = laterSchema(node, opset)) {
    checkArity(node, opset, later->minIn, later->maxIn, later->minOut,
               later->maxOut, problems);
    for (int i = 0; i < later->minIn && i < node.input_size(); ++i)
      if (node.input(i).empty())
        problems.push_back("leaves its required input " + std::to_string(i) +
                           " empty");
    return problems;
  }
  const onnx::OpSchema *schema =
      node.domain().empty() || node.domain() == "ai.onnx"
          ? onnx::OpSchemaRegistry::Schema(node.op_type(),
                                           static_cast<int>(opset), "")
          : nullptr;
  if (!schema)
    return problems;
  int inputs = node.input_size();
  checkArity(node, opset, schema->min_input(), schema->max_input(),
             schema->min_output(), schema->max_output(), problems);
  const auto &formal = schema->inputs();
  for (int i = 0; i < inputs && i < static_cast<int>(formal.size()); ++i)
    if (node.input(i).empty() &&
        formal[i].GetOption() == onnx::OpSchema::Single)
      problems.push_back("leaves its required input " + std::to_string(i) +
                         " ('" + formal[i].GetName() + "') empty");
  const auto &known = schema->attributes();
  for (const onnx::AttributeProto &a : node.attribute()) {
    auto it = known.find(a.name());
    if (a.name() == kLegacySoftmaxAxis)
      continue;
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
