//===- RuntimeTest.cpp - The runtime's C API and its C++ wrapper ----------===//
//
// Loads hand-written model libraries (fake_model.c) and checks each
// promise of the C API: clear statuses for a missing, corrupt or foreign
// library, input validation by name, dtype and shape, and correct results.
//
//===----------------------------------------------------------------------===//

#include "tfm/abi.h"
#include "tfm/runtime.h"
#include "tfm/runtime.hpp"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <thread>

#include <fstream>
#include <string>

namespace {

const std::string kDir = TFM_FAKE_MODEL_DIR;

/// Frees the status and returns its code and message.
std::pair<tfm_status_code_t, std::string> take(tfm_status_t s) {
  std::pair<tfm_status_code_t, std::string> r{tfm_status_code(s),
                                              tfm_status_message(s)};
  tfm_status_free(s);
  return r;
}

struct ContextTest : ::testing::Test {
  void SetUp() override {
    tfm_context_options_t opts;
    tfm_context_options_init(&opts);
    opts.num_threads = 2;
    ASSERT_EQ(tfm_context_create(&opts, &ctx), nullptr);
  }
  void TearDown() override { tfm_context_release(ctx); }
  tfm_context_t *ctx = nullptr;
};

TEST_F(ContextTest, KeepsTheThreadCount) {
  EXPECT_EQ(tfm_context_num_threads(ctx), 2);
}

TEST_F(ContextTest, MissingFileIsNotFound) {
  tfm_module_t *m = nullptr;
  auto [code, msg] = take(tfm_module_load(ctx, "/no/such/model.so", &m));
  EXPECT_EQ(code, TFM_STATUS_NOT_FOUND);
  EXPECT_EQ(msg, "'/no/such/model.so': no such model file");
  EXPECT_EQ(m, nullptr);
}

TEST_F(ContextTest, TruncatedLibraryIsDataLoss) {
  // Half of a real library is not loadable.
  std::ifstream in(kDir + "/libfake_model.so", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::string path = ::testing::TempDir() + "truncated_model.so";
  std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size() / 2);
  tfm_module_t *m = nullptr;
  auto [code, msg] = take(tfm_module_load(ctx, path.c_str(), &m));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("is not a loadable model library"), std::string::npos)
      << msg;
}

TEST_F(ContextTest, EveryTruncationIsDataLoss) {
  std::ifstream in(kDir + "/libfake_model.so", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::string path = ::testing::TempDir() + "cut_model.so";
  for (size_t cut = 0; cut < bytes.size(); cut += bytes.size() / 64 + 1) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), cut);
    tfm_module_t *m = nullptr;
    auto [code, msg] = take(tfm_module_load(ctx, path.c_str(), &m));
    EXPECT_EQ(code, TFM_STATUS_DATA_LOSS) << "cut at " << cut << ": " << msg;
    EXPECT_EQ(m, nullptr);
  }
}

TEST_F(ContextTest, ForeignAbiVersionIsIncompatible) {
  tfm_module_t *m = nullptr;
  std::string path = kDir + "/libfake_model_abi99.so";
  auto [code, msg] = take(tfm_module_load(ctx, path.c_str(), &m));
  EXPECT_EQ(code, TFM_STATUS_INCOMPATIBLE);
  EXPECT_NE(msg.find("was built for model ABI version 99; this runtime reads "
                     "version " + std::to_string(TFM_ABI_VERSION)),
            std::string::npos)
      << msg;
}

TEST_F(ContextTest, LibraryWithoutTheSymbolIsIncompatible) {
  tfm_module_t *m = nullptr;
  // The runtime itself is a shared library, but not a model.
  std::string path = kDir + "/../../../lib/libtfm_runtime.so";
  auto [code, msg] = take(tfm_module_load(ctx, path.c_str(), &m));
  EXPECT_EQ(code, TFM_STATUS_INCOMPATIBLE);
  EXPECT_NE(msg.find("does not export tfm_model_v1"), std::string::npos)
      << msg;
}

TEST_F(ContextTest, CorruptMetadataIsDataLoss) {
  tfm_module_t *m = nullptr;
  std::string path = kDir + "/libfake_model_corrupt.so";
  auto [code, msg] = take(tfm_module_load(ctx, path.c_str(), &m));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("output 0 of entry 'infer' ('y') has the invalid shape [2, -3]"),
            std::string::npos)
      << msg;
}

struct SessionTest : ContextTest {
  void SetUp() override {
    ContextTest::SetUp();
    std::string path = kDir + "/libfake_model.so";
    ASSERT_EQ(tfm_module_load(ctx, path.c_str(), &module), nullptr);
    ASSERT_EQ(tfm_session_create(module, nullptr, &session), nullptr);
    const int64_t xd[] = {2, 3}, bd[] = {3};
    const float xv[] = {1, 2, 3, 4, 5, 6}, bv[] = {0.5f, 0.25f, 0.125f};
    ASSERT_EQ(tfm_tensor_create_copy(TFM_DTYPE_F32, xd, 2, xv, sizeof(xv), &x),
              nullptr);
    ASSERT_EQ(tfm_tensor_create_copy(TFM_DTYPE_F32, bd, 1, bv, sizeof(bv), &b),
              nullptr);
  }
  void TearDown() override {
    tfm_tensor_release(x);
    tfm_tensor_release(b);
    tfm_session_release(session);
    tfm_module_release(module);
    ContextTest::TearDown();
  }
  tfm_module_t *module = nullptr;
  tfm_session_t *session = nullptr;
  tfm_tensor_t *x = nullptr, *b = nullptr;
};

TEST_F(SessionTest, DescribesItsEntryPoints) {
  ASSERT_EQ(tfm_module_num_entries(module), 1u);
  EXPECT_STREQ(tfm_module_entry_name(module, 0), "infer");
  tfm_tensor_desc_t d;
  ASSERT_EQ(tfm_module_entry_io(module, "infer", 0, 1, &d), nullptr);
  EXPECT_STREQ(d.name, "bias");
  EXPECT_EQ(d.dtype, TFM_DTYPE_F32);
  EXPECT_EQ(d.rank, 1u);
}

TEST_F(SessionTest, RunsAnyNumberOfTimes) {
  for (int run = 0; run < 3; ++run) {
    tfm_tensor_t *inputs[] = {x, b};
    tfm_tensor_t *y = nullptr;
    ASSERT_EQ(tfm_session_run(session, "infer", inputs, 2, &y, 1), nullptr);
    ASSERT_EQ(tfm_tensor_rank(y), 2u);
    const float *v = static_cast<const float *>(tfm_tensor_data(y));
    // x + bias + the embedded weights [100, 200, 300].
    const float want[] = {101.5f, 202.25f, 303.125f,
                          104.5f, 205.25f, 306.125f};
    for (int i = 0; i < 6; ++i)
      EXPECT_FLOAT_EQ(v[i], want[i]) << i;
    tfm_tensor_release(y);
  }
}

TEST_F(SessionTest, RejectsAWrongShapeByName) {
  const int64_t bad[] = {4};
  tfm_tensor_t *b4 = nullptr;
  ASSERT_EQ(tfm_tensor_create(TFM_DTYPE_F32, bad, 1, &b4), nullptr);
  tfm_tensor_t *inputs[] = {x, b4};
  tfm_tensor_t *y = nullptr;
  auto [code, msg] = take(tfm_session_run(session, "infer", inputs, 2, &y, 1));
  EXPECT_EQ(code, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(msg, "entry 'infer': input 1 ('bias') must be f32 [3] but is f32 "
                 "[4]");
  EXPECT_EQ(y, nullptr);
  tfm_tensor_release(b4);
}

TEST_F(SessionTest, RejectsAWrongDtype) {
  const int64_t d[] = {3};
  tfm_tensor_t *bi = nullptr;
  ASSERT_EQ(tfm_tensor_create(TFM_DTYPE_I64, d, 1, &bi), nullptr);
  tfm_tensor_t *inputs[] = {x, bi};
  tfm_tensor_t *y = nullptr;
  auto [code, msg] = take(tfm_session_run(session, "infer", inputs, 2, &y, 1));
  EXPECT_EQ(code, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(msg, "entry 'infer': input 1 ('bias') must be f32 [3] but is i64 "
                 "[3]");
  tfm_tensor_release(bi);
}

TEST_F(SessionTest, RejectsAMissingInputAndAnUnknownEntry) {
  tfm_tensor_t *inputs[] = {x};
  tfm_tensor_t *y = nullptr;
  auto [code, msg] = take(tfm_session_run(session, "infer", inputs, 1, &y, 1));
  EXPECT_EQ(code, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(msg, "entry 'infer' takes 2 inputs but 1 were given");
  auto [code2, msg2] =
      take(tfm_session_run(session, "train_step", inputs, 1, &y, 1));
  EXPECT_EQ(code2, TFM_STATUS_NOT_FOUND);
  EXPECT_NE(msg2.find("has no entry point 'train_step'; it has: infer"),
            std::string::npos)
      << msg2;
}

TEST_F(ContextTest, CompiledCodeRunsKernelsTheSessionCreated) {
  tfm_module_t *m = nullptr;
  std::string path = kDir + "/libfake_model_kernels.so";
  ASSERT_EQ(tfm_module_load(ctx, path.c_str(), &m), nullptr);
  tfm_session_t *s = nullptr;
  ASSERT_EQ(tfm_session_create(m, nullptr, &s), nullptr);
  const int64_t d[] = {2, 3};
  const float xv[] = {1, 2, 3, 4, 5, 6};
  tfm_tensor_t *x = nullptr, *y = nullptr;
  ASSERT_EQ(tfm_tensor_create_copy(TFM_DTYPE_F32, d, 2, xv, sizeof(xv), &x),
            nullptr);
  tfm_tensor_t *inputs[] = {x};
  ASSERT_EQ(tfm_session_run(s, "project", inputs, 1, &y, 1), nullptr);
  const float *v = static_cast<const float *>(tfm_tensor_data(y));
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(v[i], 2 * xv[i]); // x · (2·I)ᵀ
  tfm_tensor_release(y);
  tfm_tensor_release(x);
  tfm_session_release(s);
  tfm_module_release(m);
}

TEST(Tensor, ValidatesItsArguments) {
  tfm_tensor_t *t = nullptr;
  const int64_t neg[] = {2, -1};
  auto [code, msg] = take(tfm_tensor_create(TFM_DTYPE_F32, neg, 2, &t));
  EXPECT_EQ(code, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(msg, "tfm_tensor_create: dimension 1 is negative (-1)");
  const int64_t d[] = {2};
  float v[3] = {};
  auto [code2, msg2] =
      take(tfm_tensor_create_copy(TFM_DTYPE_F32, d, 1, v, sizeof(v), &t));
  EXPECT_EQ(code2, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(msg2, "tfm_tensor_create_copy: the shape needs 8 bytes but 12 "
                  "were given");
  const int64_t huge[] = {int64_t(1) << 40, int64_t(1) << 40};
  auto [code3, msg3] = take(tfm_tensor_create(TFM_DTYPE_F32, huge, 2, &t));
  EXPECT_EQ(code3, TFM_STATUS_RESOURCE_EXHAUSTED);
}

TEST(Wrapper, RunsAndThrowsWithTheStatus) {
  // The external-weights variant reads fake_weights.bin beside it.
  const float weights[12] = {1, 2, 3, 2, 0, 0, 0, 2, 0, 0, 0, 2};
  std::ofstream(kDir + "/fake_weights.bin", std::ios::binary)
      .write(reinterpret_cast<const char *>(weights), sizeof(weights));
  tfm::Context ctx(1);
  tfm::Module module(ctx, kDir + "/libfake_model_external.so");
  tfm::Session session(module);
  tfm::Tensor x(TFM_DTYPE_F32, {2, 3}), b(TFM_DTYPE_F32, {3});
  std::vector<tfm::Tensor> out = session.run("infer", {&x, &b});
  ASSERT_EQ(out.size(), 1u);
  // Zero inputs plus the external weights file [1, 2, 3].
  EXPECT_FLOAT_EQ(out[0].data<float>()[2], 3.0f);
  EXPECT_FLOAT_EQ(out[0].data<float>()[5], 3.0f);
  try {
    tfm::Module missing(ctx, "/no/such/file.so");
    FAIL() << "no exception";
  } catch (const tfm::Error &e) {
    EXPECT_EQ(e.code(), TFM_STATUS_NOT_FOUND);
  }
}

TEST(NullHandles, AccessorsReadAsEmpty) {
  EXPECT_EQ(tfm_tensor_rank(nullptr), 0u);
  EXPECT_EQ(tfm_tensor_dims(nullptr), nullptr);
  EXPECT_EQ(tfm_tensor_byte_size(nullptr), 0u);
  EXPECT_EQ(tfm_tensor_data(nullptr), nullptr);
  EXPECT_EQ(static_cast<int>(tfm_tensor_dtype(nullptr)), 0);
  EXPECT_EQ(tfm_context_num_threads(nullptr), 0);
  EXPECT_EQ(tfm_module_num_entries(nullptr), 0u);
  EXPECT_EQ(tfm_module_entry_name(nullptr, 0), nullptr);
  EXPECT_EQ(tfm_session_num_parameters(nullptr), 0u);
  EXPECT_EQ(tfm_session_parameter_name(nullptr, 0), nullptr);
  EXPECT_EQ(tfm_session_step_count(nullptr), 0);
  EXPECT_EQ(tfm_status_code(nullptr), TFM_STATUS_OK);
  EXPECT_STREQ(tfm_status_message(nullptr), "");
  tfm_context_options_init(nullptr);
  tfm_session_options_init(nullptr);
  tfm_tensor_release(nullptr);
  tfm_session_release(nullptr);
  tfm_module_release(nullptr);
  tfm_context_release(nullptr);
  tfm_status_free(nullptr);
}

// A session serves one call at a time: a second thread's call while the
// first is inside compiled code fails with FAILED_PRECONDITION and changes
// nothing, and the first run completes with the right outputs.
TEST_F(ContextTest, ASecondThreadsCallOnABusySessionFails) {
  std::string path = kDir + "/libfake_model_blocking.so";
  void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(lib);
  auto block = reinterpret_cast<void (*)(int)>(dlsym(lib, "fake_block"));
  auto entered = reinterpret_cast<int (*)()>(dlsym(lib, "fake_entered_infer"));
  ASSERT_TRUE(block && entered);
  tfm_module_t *module = nullptr;
  tfm_session_t *session = nullptr;
  ASSERT_EQ(tfm_module_load(ctx, path.c_str(), &module), nullptr);
  ASSERT_EQ(tfm_session_create(module, nullptr, &session), nullptr);
  const int64_t xd[] = {2, 3}, bd[] = {3};
  tfm_tensor_t *x = nullptr, *b = nullptr;
  ASSERT_EQ(tfm_tensor_create(TFM_DTYPE_F32, xd, 2, &x), nullptr);
  ASSERT_EQ(tfm_tensor_create(TFM_DTYPE_F32, bd, 1, &b), nullptr);
  tfm_tensor_t *inputs[] = {x, b};

  block(1);
  tfm_tensor_t *first = nullptr;
  tfm_status_t firstStatus = nullptr;
  std::thread runner([&] {
    firstStatus = tfm_session_run(session, "infer", inputs, 2, &first, 1);
  });
  while (!entered())
    std::this_thread::yield();
  tfm_tensor_t *second = nullptr;
  auto [code, msg] =
      take(tfm_session_run(session, "infer", inputs, 2, &second, 1));
  EXPECT_EQ(code, TFM_STATUS_FAILED_PRECONDITION);
  EXPECT_NE(msg.find("another thread is using this session"),
            std::string::npos)
      << msg;
  EXPECT_EQ(second, nullptr);
  auto [ckptCode, ckptMsg] = take(tfm_session_save_checkpoint(
      session, (::testing::TempDir() + "busy.ckpt").c_str()));
  EXPECT_EQ(ckptCode, TFM_STATUS_FAILED_PRECONDITION) << ckptMsg;
  block(0);
  runner.join();
  ASSERT_EQ(firstStatus, nullptr) << tfm_status_message(firstStatus);
  // Zero inputs plus the weights [100, 200, 300].
  const float *y = static_cast<const float *>(tfm_tensor_data(first));
  EXPECT_FLOAT_EQ(y[0], 100.0f);
  EXPECT_FLOAT_EQ(y[5], 300.0f);
  // Free again, the session runs.
  ASSERT_EQ(tfm_session_run(session, "infer", inputs, 2, &second, 1), nullptr);
  tfm_tensor_release(first);
  tfm_tensor_release(second);
  tfm_tensor_release(x);
  tfm_tensor_release(b);
  tfm_session_release(session);
  tfm_module_release(module);
  dlclose(lib);
}

} // namespace
