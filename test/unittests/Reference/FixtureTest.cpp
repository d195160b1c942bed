//===- FixtureTest.cpp - The interpreter against PyTorch fixtures ---------===//
//
// Each folder under test/fixtures/reference holds one tfm op in @infer, its
// inputs, and outputs that PyTorch computed in float64
// (make_reference_fixtures.py). The interpreter must agree to 1e-9.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "tfm/Frontends/ONNX/TensorProto.h"

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace mlir::tfm::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> fixtureNames() {
  std::vector<std::string> names;
  for (const auto &entry : fs::directory_iterator(TFM_FIXTURE_DIR))
    if (entry.is_directory())
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<mlir::tfm::reference::Tensor> readAll(const fs::path &dir,
                                                  const std::string &prefix) {
  std::vector<mlir::tfm::reference::Tensor> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(p))
      return out;
    mlir::tfm::onnx_io::NamedTensor t;
    std::string err;
    EXPECT_TRUE(mlir::tfm::onnx_io::readTensorProtoFile(p.string(), t, err))
        << err;
    out.push_back(std::move(t.tensor));
  }
}

class TorchFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchFixture, MatchesPyTorchInDouble) {
  fs::path dir = fs::path(TFM_FIXTURE_DIR) / GetParam();
  std::ifstream in(dir / "model.mlir");
  std::stringstream text;
  text << in.rdbuf();
  InterpreterHarness h;
  ASSERT_TRUE(h.parse(text.str()));
  auto results = h.run(readAll(dir, "input"));
  ASSERT_TRUE(succeeded(results)) << h.diagnostics;
  auto expected = readAll(dir, "output");
  ASSERT_EQ(results->size(), expected.size());
  ASSERT_FALSE(expected.empty());
  for (size_t o = 0; o < expected.size(); ++o) {
    const auto &got = (*results)[o], &want = expected[o];
    ASSERT_EQ(got.shape, want.shape) << "output " << o;
    if (want.isInt()) {
      EXPECT_EQ(got.ints, want.ints) << "output " << o;
      continue;
    }
    for (int64_t i = 0; i < want.numElements(); ++i)
      EXPECT_NEAR(got.get(i), want.get(i), 1e-12 + 1e-9 * std::fabs(want.get(i)))
          << "output " << o << " at flat index " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, TorchFixture,
                         ::testing::ValuesIn(fixtureNames()),
                         [](const auto &info) { return info.param; });

} // namespace
