//===- WeightImportTest.cpp - Large initializers read once, in their layout ===//
//
// The re-encoded model must parse to the same model, each large raw_data
// replaced by a reference to exactly its bytes in the original; the import
// must give the values the model holds, transposed only for a weight that
// nothing but MatMuls read.
//
//===----------------------------------------------------------------------===//

#include "../../../frontends/onnx/lib/ImporterImpl.h"
#include "tfm/Frontends/ONNX/Importer.h"

#include "tfm/IR/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>

using namespace mlir;
using namespace mlir::tfm::onnx_import;

namespace {

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return v;
}

void setRaw(onnx::TensorProto &t, const std::vector<float> &v) {
  t.set_raw_data(std::string(reinterpret_cast<const char *>(v.data()),
                             v.size() * sizeof(float)));
}

/// y = x · W (W 64×32, large), plus b (small), plus c (float_data).
onnx::ModelProto matmulModel(const std::vector<float> &w) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("g");
  auto tensor = [&](const char *name, std::vector<int64_t> dims) {
    onnx::TensorProto *t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    return t;
  };
  setRaw(*tensor("W", {64, 32}), w);
  setRaw(*tensor("b", {32}), ramp(32));
  onnx::TensorProto *c = tensor("c", {32});
  for (float f : ramp(32))
    c->add_float_data(f);
  auto io = [](onnx::ValueInfoProto *v, const char *name,
               std::vector<int64_t> dims) {
    v->set_name(name);
    auto *tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      tt->mutable_shape()->add_dim()->set_dim_value(d);
  };
  io(g->add_input(), "x", {2, 64});
  io(g->add_output(), "y", {2, 32});
  auto node = [&](const char *op, std::vector<const char *> in,
                  const char *out) {
    onnx::NodeProto *n = g->add_node();
    n->set_op_type(op);
    for (const char *i : in)
      n->add_input(i);
    n->add_output(out);
  };
  node("MatMul", {"x", "W"}, "xw");
  node("Add", {"xw", "b"}, "xwb");
  node("Add", {"xwb", "c"}, "y");
  return m;
}

std::string entry(const onnx::TensorProto &t, const std::string &key) {
  for (const auto &e : t.external_data())
    if (e.key() == key)
      return e.value();
  return "";
}

TEST(WeightImport, LeavesOnlyLargeRawDataInTheModel) {
  std::vector<float> w = ramp(64 * 32);
  std::string bytes = matmulModel(w).SerializeAsString();
  std::optional<std::string> detached = detachInitializerData(bytes);
  ASSERT_TRUE(detached);
  EXPECT_LT(detached->size(), bytes.size() - w.size() * sizeof(float) + 64);

  onnx::ModelProto original, stripped;
  ASSERT_TRUE(original.ParseFromString(bytes));
  ASSERT_TRUE(stripped.ParseFromString(*detached));
  const onnx::TensorProto &W = stripped.graph().initializer(0);
  EXPECT_FALSE(W.has_raw_data());
  EXPECT_EQ(W.data_location(), onnx::TensorProto::EXTERNAL);
  EXPECT_EQ(entry(W, "location"), kInModelLocation.str());
  size_t offset = std::stoull(entry(W, "offset"));
  size_t length = std::stoull(entry(W, "length"));
  ASSERT_EQ(length, w.size() * sizeof(float));
  ASSERT_LE(offset + length, bytes.size());
  EXPECT_EQ(std::memcmp(bytes.data() + offset, w.data(), length), 0);

  // Everything else is as it was: the small and the float_data tensors,
  // the nodes, the graph's inputs and outputs.
  onnx::TensorProto restored = W;
  restored.clear_external_data();
  restored.clear_data_location();
  restored.set_raw_data(bytes.substr(offset, length));
  *stripped.mutable_graph()->mutable_initializer(0) = restored;
  EXPECT_EQ(stripped.SerializeAsString(), original.SerializeAsString());
}

TEST(WeightImport, KeepsTensorsThatAlreadyNameTheirData) {
  onnx::ModelProto m = matmulModel(ramp(64 * 32));
  m.mutable_graph()->mutable_initializer(0)->set_data_location(
      onnx::TensorProto::EXTERNAL);
  EXPECT_FALSE(detachInitializerData(m.SerializeAsString()));
}

/// A length-delimited field as the wire format writes it.
std::string field(unsigned number, const std::string &payload) {
  std::string out(1, static_cast<char>(number << 3 | 2));
  for (uint64_t v = payload.size();; v >>= 7) {
    out.push_back(static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
    if (v < 0x80)
      break;
  }
  return out + payload;
}

TEST(WeightImport, RefersToTheLastOfRepeatedRawData) {
  // The parser keeps the last of a repeated scalar field; so must the walk.
  std::string first(8192, '\x01'), last(8192, '\x02');
  onnx::TensorProto a, b;
  a.set_name("W");
  a.set_data_type(onnx::TensorProto::FLOAT);
  a.add_dims(2048);
  a.set_raw_data(first);
  b.set_raw_data(last);
  std::string tensor = a.SerializeAsString() + b.SerializeAsString();
  std::string model = field(7, field(5, tensor));
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(model));
  ASSERT_EQ(parsed.graph().initializer(0).raw_data(), last);

  std::optional<std::string> detached = detachInitializerData(model);
  ASSERT_TRUE(detached);
  ASSERT_TRUE(parsed.ParseFromString(*detached));
  const onnx::TensorProto &t = parsed.graph().initializer(0);
  EXPECT_FALSE(t.has_raw_data());
  EXPECT_EQ(t.name(), "W");
  EXPECT_EQ(model.substr(std::stoull(entry(t, "offset")),
                         std::stoull(entry(t, "length"))),
            last);
}

TEST(WeightImport, RefusesBytesThatAreNotAModel) {
  EXPECT_FALSE(detachInitializerData(""));
  EXPECT_FALSE(detachInitializerData("\x3a\xff\xff\xff\xff\x0f"));
  // A group (wire type 3), which onnx.proto never uses.
  EXPECT_FALSE(detachInitializerData("\x0b\x0c"));
  // A model with no large initializer needs no re-encoding.
  onnx::ModelProto m = matmulModel(ramp(64 * 32));
  m.mutable_graph()->mutable_initializer(0)->clear_raw_data();
  EXPECT_FALSE(detachInitializerData(m.SerializeAsString()));
}

TEST(WeightImport, ImportGivesTheModelsValuesTransposed) {
  std::vector<float> w = ramp(64 * 32);
  std::string bytes = matmulModel(w).SerializeAsString();
  MLIRContext ctx;
  ImportOptions options;
  OwningOpRef<ModuleOp> module = importBytes(&ctx, bytes, "model.onnx", options);
  ASSERT_TRUE(module);
  bool found = false;
  module->walk([&](arith::ConstantOp c) {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!dense || dense.getNumElements() != 64 * 32)
      return;
    found = true;
    // Only a MatMul reads W, which the importer lays out as [N, K] for a
    // matmul with transpose_rhs.
    ASSERT_EQ(cast<RankedTensorType>(dense.getType()).getShape(),
              ArrayRef<int64_t>({32, 64}));
    auto values = dense.getValues<float>();
    for (int64_t k = 0; k < 64; ++k)
      for (int64_t n = 0; n < 32; ++n)
        ASSERT_EQ(values[n * 64 + k], w[k * 32 + n]) << k << ", " << n;
  });
  EXPECT_TRUE(found);
  bool transposed = false;
  module->walk([&](mlir::tfm::MatmulOp m) { transposed = m.getTransposeRhs(); });
  EXPECT_TRUE(transposed);
}

TEST(WeightImport, KeepsTheLayoutOfAWeightAnotherOpReads) {
  // W also feeds a Mul (as a tied embedding would feed a Gather): the
  // MatMul then reads it as the model lays it out.
  onnx::ModelProto m = matmulModel(ramp(64 * 32));
  onnx::GraphProto *g = m.mutable_graph();
  onnx::NodeProto *mul = g->add_node();
  mul->set_op_type("Mul");
  mul->add_input("W");
  mul->add_input("W");
  mul->add_output("w2");
  onnx::ValueInfoProto *out = g->add_output();
  out->set_name("w2");
  auto *tt = out->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(64);
  tt->mutable_shape()->add_dim()->set_dim_value(32);
  MLIRContext ctx;
  ImportOptions options;
  OwningOpRef<ModuleOp> module =
      importBytes(&ctx, m.SerializeAsString(), "model.onnx", options);
  ASSERT_TRUE(module);
  int matmuls = 0;
  module->walk([&](mlir::tfm::MatmulOp op) {
    ++matmuls;
    EXPECT_FALSE(op.getTransposeRhs());
    EXPECT_EQ(cast<RankedTensorType>(op.getRhs().getType()).getShape(),
              ArrayRef<int64_t>({64, 32}));
  });
  EXPECT_EQ(matmuls, 1);
}

} // namespace
