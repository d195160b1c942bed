//===- DynamicTest.cpp - Entries that serve a range of sizes --------------===//
//
// Runs the encoder of test/models/lengths (compiled for sequence=1..40,
// buckets 1..16, 24, 32, 40) through the C API: the entry as it is listed
// (its buckets hidden, -1 where the size varies, the range), runs at sizes
// inside and outside the range, and a padded run against the same input
// run by the bucket itself with the padding masked by hand. The outputs'
// values are checked against PyTorch in test/tfmc/size-range.test.
//
//===----------------------------------------------------------------------===//

#include "tfm/runtime.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

const std::string kModel = TFM_LENGTHS_SO;
constexpr int64_t kBatch = 2, kWidth = 32, kMax = 40;

tfm::Tensor input(int64_t length) {
  tfm::Tensor t(TFM_DTYPE_F32, {kBatch, length, kWidth});
  float *x = t.data<float>();
  for (int64_t i = 0; i < kBatch * length * kWidth; ++i)
    x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  return t;
}

TEST(Dynamic, ListsTheEntryWithItsRanges) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  ASSERT_EQ(tfm_module_num_entries(m.get()), 1u);
  EXPECT_STREQ(tfm_module_entry_name(m.get(), 0), "infer");
  for (int isOutput = 0; isOutput < 2; ++isOutput) {
    tfm_tensor_desc_t d;
    tfm::check(tfm_module_entry_io(m.get(), "infer", isOutput, 0, &d));
    ASSERT_EQ(d.rank, 3u);
    EXPECT_EQ(std::vector<int64_t>(d.dims, d.dims + 3),
              (std::vector<int64_t>{kBatch, -1, kWidth}));
    int64_t lo[3], hi[3];
    tfm::check(tfm_module_entry_io_range(m.get(), "infer", isOutput, 0, lo, hi));
    EXPECT_EQ(std::vector<int64_t>(lo, lo + 3),
              (std::vector<int64_t>{kBatch, 1, kWidth}));
    EXPECT_EQ(std::vector<int64_t>(hi, hi + 3),
              (std::vector<int64_t>{kBatch, kMax, kWidth}));
    // The varying dim is named by its symbol; the fixed ones by nothing.
    std::vector<std::string> symbols;
    for (size_t r = 0; r < 3; ++r) {
      const char *symbol = nullptr;
      tfm::check(tfm_module_entry_io_symbol(m.get(), "infer", isOutput, 0, r,
                                            &symbol));
      symbols.push_back(symbol);
    }
    EXPECT_EQ(symbols, (std::vector<std::string>{"", "sequence", ""}));
    const char *symbol = nullptr;
    tfm_status_t past =
        tfm_module_entry_io_symbol(m.get(), "infer", isOutput, 0, 3, &symbol);
    EXPECT_EQ(tfm_status_code(past), TFM_STATUS_OUT_OF_RANGE);
    tfm_status_free(past);
  }
}

TEST(Dynamic, OutputsHaveTheRunsSizes) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session s(m);
  for (int64_t length : {1, 16, 17, 24, 33, 40}) {
    tfm::Tensor x = input(length);
    std::vector<tfm::Tensor> y = s.run("infer", {&x});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(std::vector<int64_t>(tfm_tensor_dims(y[0].get()),
                                   tfm_tensor_dims(y[0].get()) + 3),
              (std::vector<int64_t>{kBatch, length, kWidth}));
  }
}

// A run of 17 pads to the bucket of 24; the same input padded by hand and
// run by the bucket itself, with its key mask, gives the same rows.
TEST(Dynamic, APaddedRunIsTheBucketsRunCutBack) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session s(m);
  constexpr int64_t kLength = 17, kBucket = 24;
  tfm::Tensor x = input(kLength);
  std::vector<tfm::Tensor> y = s.run("infer", {&x});
  tfm::Tensor padded(TFM_DTYPE_F32, {kBatch, kBucket, kWidth});
  for (int64_t b = 0; b < kBatch; ++b)
    std::copy(x.data<float>() + b * kLength * kWidth,
              x.data<float>() + (b + 1) * kLength * kWidth,
              padded.data<float>() + b * kBucket * kWidth);
  tfm::Tensor mask(TFM_DTYPE_F32, {kBucket});
  for (int64_t j = kLength; j < kBucket; ++j)
    mask.data<float>()[j] = -std::numeric_limits<float>::infinity();
  tfm_tensor_t *in[] = {padded.get(), mask.get()}, *out[1] = {nullptr};
  tfm::check(tfm_session_run(s.get(), "infer.sequence24", in, 2, out, 1));
  tfm::Tensor whole(out[0]);
  const float *cut = y[0].data<float>(), *full = whole.data<float>();
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t i = 0; i < kLength * kWidth; ++i)
      ASSERT_EQ(cut[b * kLength * kWidth + i], full[b * kBucket * kWidth + i])
          << "batch " << b << ", element " << i;
}

TEST(Dynamic, SizesOutsideTheRangeAreRefused) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session s(m);
  for (int64_t length : {int64_t(0), kMax + 1}) {
    tfm::Tensor x = input(length);
    try {
      s.run("infer", {&x});
      FAIL() << "a length of " << length << " ran";
    } catch (const tfm::Error &e) {
      EXPECT_EQ(e.code(), TFM_STATUS_OUT_OF_RANGE);
      EXPECT_NE(std::string(e.what()).find("outside the range 1..40"),
                std::string::npos)
          << e.what();
    }
  }
  // A fixed dim of another size is a wrong shape, not a range.
  tfm::Tensor wrong(TFM_DTYPE_F32, {kBatch + 1, 5, kWidth});
  try {
    s.run("infer", {&wrong});
    FAIL() << "a batch of 3 ran";
  } catch (const tfm::Error &e) {
    EXPECT_EQ(e.code(), TFM_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("must be f32 [2, sequence, 32]"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
