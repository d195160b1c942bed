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
  EXPECT_EQ(msg, "entry 'infer' takes 2 inputs ('x', 'bias') but 1 were given");
  auto [code2, msg2] =
      take(tfm_session_run(session, "train_step", inputs, 1, &y, 1));
  EXPECT_EQ(code2, TFM_STATUS_NOT_FOUND);
  EXPECT_NE(msg2.find("has no entry point 'train_step'; it has: infer"),
            std::string::npos)
      << msg2;
}

TEST(Versions, TheLibraryReportsTheHeadersVersions) {
  EXPECT_STREQ(tfm_runtime_version(), TFM_VERSION_STRING);
  EXPECT_EQ(tfm_runtime_version_number(), unsigned(TFM_VERSION));
  EXPECT_EQ(tfm_runtime_model_abi_version(), TFM_ABI_VERSION);
  EXPECT_EQ(tfm::version(), TFM_VERSION_STRING);
}

/// The buffer fake_model's "infer" was last handed: inputs 0 and 1, then
/// its output (2).
const void *seenBuffer(tfm_module_t *, int i) {
  auto *probe = reinterpret_cast<const void *(*)(int)>(
      dlsym(RTLD_DEFAULT, "fake_seen_buffer"));
  return probe ? probe(i) : nullptr;
}

TEST_F(SessionTest, ViewsAreReadAndWrittenInPlace) {
  // The library is loaded already; make its symbols visible to dlsym.
  void *handle = dlopen((kDir + "/libfake_model.so").c_str(),
                        RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  ASSERT_NE(handle, nullptr);
  float xs[6] = {1, 2, 3, 4, 5, 6}, bs[3] = {0.5f, 0.25f, 0.125f}, ys[6] = {};
  const int64_t xd[] = {2, 3}, bd[] = {3};
  tfm_tensor_t *xv = nullptr, *bv = nullptr, *yv = nullptr;
  ASSERT_EQ(tfm_tensor_create_view(TFM_DTYPE_F32, xd, 2, xs, sizeof(xs), &xv),
            nullptr);
  ASSERT_EQ(tfm_tensor_create_view(TFM_DTYPE_F32, bd, 1, bs, sizeof(bs), &bv),
            nullptr);
  ASSERT_EQ(tfm_tensor_create_view(TFM_DTYPE_F32, xd, 2, ys, sizeof(ys), &yv),
            nullptr);
  EXPECT_TRUE(tfm_tensor_is_view(xv));
  EXPECT_FALSE(tfm_tensor_is_view(x));
  EXPECT_EQ(tfm_tensor_data(xv), xs);
  // By name, in another order than the entry's, into the caller's array.
  const char *inNames[] = {"bias", "x"};
  tfm_tensor_t *inputs[] = {bv, xv};
  const char *outNames[] = {"y"};
  tfm_tensor_t *outputs[] = {yv};
  ASSERT_EQ(tfm_session_run_with(session, "infer", nullptr, inNames, inputs, 2,
                                 outNames, outputs, 1),
            nullptr);
  EXPECT_EQ(outputs[0], yv);
  EXPECT_EQ(seenBuffer(module, 0), xs);
  EXPECT_EQ(seenBuffer(module, 1), bs);
  EXPECT_EQ(seenBuffer(module, 2), ys);
  const float want[] = {101.5f, 202.25f, 303.125f, 104.5f, 205.25f, 306.125f};
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(ys[i], want[i]) << i;
  // Releasing the views leaves the caller's memory alone.
  tfm_tensor_release(xv);
  tfm_tensor_release(bv);
  tfm_tensor_release(yv);
  EXPECT_FLOAT_EQ(xs[5], 6);
  dlclose(handle);
}

// A CPU session takes host tensors, and "cpu" device views, which are
// host memory; a GPU's tensor or stream is refused by name. On the CPU,
// outputs_on_device makes host tensors.
TEST_F(SessionTest, ACPUSessionTakesHostTensorsOnly) {
  float xs[6] = {1, 2, 3, 4, 5, 6};
  const int64_t xd[] = {2, 3};
  tfm_tensor_t *onCpu = nullptr, *onGpu = nullptr;
  ASSERT_EQ(tfm_tensor_create_device_view(TFM_DTYPE_F32, xd, 2, nullptr, xs,
                                          sizeof(xs), &onCpu),
            nullptr);
  EXPECT_STREQ(tfm_tensor_device(onCpu), "cpu");
  EXPECT_STREQ(tfm_tensor_device(x), "cpu");
  tfm_run_options_t o;
  tfm_run_options_init(&o);
  o.outputs_on_device = 1;
  tfm_tensor_t *inputs[] = {onCpu, b};
  tfm_tensor_t *y = nullptr;
  ASSERT_EQ(tfm_session_run_with(session, "infer", &o, nullptr, inputs, 2,
                                 nullptr, &y, 1),
            nullptr);
  EXPECT_STREQ(tfm_tensor_device(y), "cpu");
  EXPECT_FLOAT_EQ(static_cast<float *>(tfm_tensor_data(y))[0], 101.5f);
  tfm_tensor_release(y);
  y = nullptr;
  ASSERT_EQ(tfm_tensor_create_device_view(TFM_DTYPE_F32, xd, 2, "cuda:0", xs,
                                          sizeof(xs), &onGpu),
            nullptr);
  inputs[0] = onGpu;
  tfm_status_t s = tfm_session_run_with(session, "infer", nullptr, nullptr,
                                        inputs, 2, nullptr, &y, 1);
  EXPECT_EQ(tfm_status_code(s), TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(tfm_status_message(s),
               "entry 'infer': input 'x' is on cuda:0, but the session "
               "computes on cpu; give a tensor on the host or on cpu");
  tfm_status_free(s);
  inputs[0] = x;
  o.use_stream = 1;
  s = tfm_session_run_with(session, "infer", &o, nullptr, inputs, 2, nullptr,
                           &y, 1);
  EXPECT_STREQ(tfm_status_message(s),
               "tfm_run_options_t: use_stream orders a run with a CUDA "
               "stream, but the session computes on cpu");
  tfm_status_free(s);
  EXPECT_EQ(y, nullptr);
  tfm_tensor_release(onGpu);
  tfm_tensor_release(onCpu);
}

TEST(Tensor, ViewsCheckTheirMemory) {
  alignas(8) char bytes[32] = {};
  const int64_t d[] = {2, 3};
  tfm_tensor_t *t = nullptr;
  auto [code, msg] =
      take(tfm_tensor_create_view(TFM_DTYPE_F32, d, 2, bytes, 20, &t));
  EXPECT_EQ(code, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(msg, "tfm_tensor_create_view: the shape needs 24 bytes but 20 "
                 "were given");
  auto [code2, msg2] =
      take(tfm_tensor_create_view(TFM_DTYPE_F32, d, 2, bytes + 1, 24, &t));
  EXPECT_EQ(code2, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(msg2.find("is not aligned to its 4-byte elements"),
            std::string::npos)
      << msg2;
  auto [code3, msg3] =
      take(tfm_tensor_create_view(TFM_DTYPE_F32, d, 2, nullptr, 24, &t));
  EXPECT_EQ(code3, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(t, nullptr);
}

TEST_F(SessionTest, RunWithNamesChecksEveryName) {
  tfm_tensor_t *inputs[] = {x, b};
  tfm_tensor_t *y = nullptr;
  const char *unknown[] = {"x", "beta"};
  auto [code, msg] = take(tfm_session_run_with(session, "infer", nullptr,
                                               unknown, inputs, 2, nullptr,
                                               &y, 1));
  EXPECT_EQ(code, TFM_STATUS_NOT_FOUND);
  EXPECT_EQ(msg, "entry 'infer' has no input 'beta'; its inputs are: 'x', "
                 "'bias'");
  const char *twice[] = {"x", "x"};
  auto [code2, msg2] = take(tfm_session_run_with(
      session, "infer", nullptr, twice, inputs, 2, nullptr, &y, 1));
  EXPECT_EQ(code2, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(msg2, "entry 'infer': input 'x' is named twice");
  const char *badOut[] = {"logits"};
  auto [code3, msg3] = take(tfm_session_run_with(
      session, "infer", nullptr, nullptr, inputs, 2, badOut, &y, 1));
  EXPECT_EQ(code3, TFM_STATUS_NOT_FOUND);
  EXPECT_EQ(msg3, "entry 'infer' has no output 'logits'; its outputs are: "
                  "'y'");
  // A given output of the wrong shape, and one over an input's memory.
  const int64_t d[] = {3, 2};
  tfm_tensor_t *wrong = nullptr;
  ASSERT_EQ(tfm_tensor_create(TFM_DTYPE_F32, d, 2, &wrong), nullptr);
  auto [code4, msg4] = take(tfm_session_run_with(
      session, "infer", nullptr, nullptr, inputs, 2, nullptr, &wrong, 1));
  EXPECT_EQ(code4, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(msg4, "entry 'infer': the tensor given for output 'y' is f32 "
                  "[3, 2] but the output is f32 [2, 3]");
  tfm_tensor_release(wrong);
  const int64_t xd[] = {2, 3};
  tfm_tensor_t *alias = nullptr;
  ASSERT_EQ(tfm_tensor_create_view(TFM_DTYPE_F32, xd, 2, tfm_tensor_data(x),
                                   tfm_tensor_byte_size(x), &alias),
            nullptr);
  auto [code5, msg5] = take(tfm_session_run_with(
      session, "infer", nullptr, nullptr, inputs, 2, nullptr, &alias, 1));
  EXPECT_EQ(code5, TFM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(msg5, "entry 'infer': the tensor given for output 'y' shares "
                  "memory with input 'x'");
  tfm_tensor_release(alias);
}

TEST_F(ContextTest, ARunStopsAtItsCancelFlagOrTimeout) {
  tfm_module_t *m = nullptr;
  std::string path = kDir + "/libfake_model_kernels.so";
  ASSERT_EQ(tfm_module_load(ctx, path.c_str(), &m), nullptr);
  tfm_session_t *s = nullptr;
  ASSERT_EQ(tfm_session_create(m, nullptr, &s), nullptr);
  const int64_t d[] = {2, 3};
  tfm_tensor_t *x = nullptr, *y = nullptr;
  ASSERT_EQ(tfm_tensor_create(TFM_DTYPE_F32, d, 2, &x), nullptr);
  tfm_cancel_flag_t *flag = nullptr;
  ASSERT_EQ(tfm_cancel_flag_create(&flag), nullptr);
  tfm_run_options_t opts;
  tfm_run_options_init(&opts);
  opts.cancel = flag;
  tfm_cancel_flag_raise(flag);
  EXPECT_TRUE(tfm_cancel_flag_is_raised(flag));
  auto [code, msg] = take(tfm_session_run_with(s, "project", &opts, nullptr,
                                               &x, 1, nullptr, &y, 1));
  EXPECT_EQ(code, TFM_STATUS_CANCELLED);
  EXPECT_NE(msg.find("entry 'project' was cancelled after"), std::string::npos)
      << msg;
  EXPECT_EQ(y, nullptr);
  // Lowered again, the same options run.
  tfm_cancel_flag_reset(flag);
  ASSERT_EQ(tfm_session_run_with(s, "project", &opts, nullptr, &x, 1, nullptr,
                                 &y, 1),
            nullptr);
  tfm_tensor_release(y);
  y = nullptr;
  // A timeout that has passed before the first kernel.
  opts.cancel = nullptr;
  opts.timeout_ms = 1e-9;
  auto [code2, msg2] = take(tfm_session_run_with(s, "project", &opts, nullptr,
                                                 &x, 1, nullptr, &y, 1));
  EXPECT_EQ(code2, TFM_STATUS_DEADLINE_EXCEEDED);
  EXPECT_NE(msg2.find("entry 'project' stopped at its timeout"),
            std::string::npos)
      << msg2;
  opts.timeout_ms = -1;
  auto [code3, msg3] = take(tfm_session_run_with(s, "project", &opts, nullptr,
                                                 &x, 1, nullptr, &y, 1));
  EXPECT_EQ(code3, TFM_STATUS_INVALID_ARGUMENT);
  // The limits belong to that run only: a plain run that follows is whole.
  ASSERT_EQ(tfm_session_run(s, "project", &x, 1, &y, 1), nullptr);
  tfm_tensor_release(y);
  tfm_cancel_flag_release(flag);
  tfm_tensor_release(x);
  tfm_session_release(s);
  tfm_module_release(m);
}

// The tensor maps that TMA loads read: on the CPU, where the emulation of
// a GPU model's kernels reads them, the runtime writes the words of
// tfm_abi_tensor_map_fn_t, once per tensor and description ("map" checks
// them and that the second call gives the first map); a description TMA
// cannot read is refused with its reason.
TEST_F(ContextTest, TensorMapsForTheEmulation) {
  tfm_module_t *m = nullptr;
  std::string path = kDir + "/libfake_model_kernels.so";
  ASSERT_EQ(tfm_module_load(ctx, path.c_str(), &m), nullptr);
  tfm_session_t *s = nullptr;
  ASSERT_EQ(tfm_session_create(m, nullptr, &s), nullptr);
  const int64_t d[] = {2, 3};
  tfm_tensor_t *x = nullptr, *y = nullptr;
  ASSERT_EQ(tfm_tensor_create(TFM_DTYPE_F32, d, 2, &x), nullptr);
  for (int run = 0; run < 2; ++run) {
    auto [code, msg] = take(tfm_session_run(s, "map", &x, 1, &y, 1));
    EXPECT_EQ(msg, "");
    tfm_tensor_release(y);
    y = nullptr;
  }
  auto [code, msg] = take(tfm_session_run(s, "bad_map", &x, 1, &y, 1));
  EXPECT_EQ(code, TFM_STATUS_INTERNAL);
  EXPECT_NE(msg.find("cannot make a tensor map for a TMA load: its stride "
                     "along dim 1 is 12 bytes, not a positive multiple of 16 "
                     "below 2^40"),
            std::string::npos)
      << msg;
  tfm_tensor_release(x);
  tfm_session_release(s);
  tfm_module_release(m);
}

TEST_F(ContextTest, ASessionWritesItsProfile) {
  tfm_module_t *m = nullptr;
  std::string path = kDir + "/libfake_model_kernels.so";
  ASSERT_EQ(tfm_module_load(ctx, path.c_str(), &m), nullptr);
  tfm_session_t *plain = nullptr, *s = nullptr;
  ASSERT_EQ(tfm_session_create(m, nullptr, &plain), nullptr);
  auto [code, msg] = take(
      tfm_session_write_profile(plain, "-", TFM_PROFILE_TABLE));
  EXPECT_EQ(code, TFM_STATUS_FAILED_PRECONDITION);
  tfm_session_options_t opts;
  tfm_session_options_init(&opts);
  opts.profile = 1;
  ASSERT_EQ(tfm_session_create(m, &opts, &s), nullptr);
  const int64_t d[] = {2, 3};
  tfm_tensor_t *x = nullptr;
  ASSERT_EQ(tfm_tensor_create(TFM_DTYPE_F32, d, 2, &x), nullptr);
  for (int run = 0; run < 3; ++run) {
    tfm_tensor_t *y = nullptr;
    ASSERT_EQ(tfm_session_run(s, "project", &x, 1, &y, 1), nullptr);
    tfm_tensor_release(y);
  }
  std::string table = ::testing::TempDir() + "profile.txt",
              trace = ::testing::TempDir() + "profile.json";
  ASSERT_EQ(tfm_session_write_profile(s, table.c_str(), TFM_PROFILE_TABLE),
            nullptr);
  ASSERT_EQ(tfm_session_write_profile(s, trace.c_str(), TFM_PROFILE_TRACE),
            nullptr);
  std::ifstream tin(table), jin(trace);
  std::string text((std::istreambuf_iterator<char>(tin)), {}),
      json((std::istreambuf_iterator<char>(jin)), {});
  // The first run (kernels created, weights packed) is left out of the
  // table's averages, and said to be.
  EXPECT_NE(text.find("2 runs, "), std::string::npos) << text;
  EXPECT_NE(text.find("(the first run, "), std::string::npos) << text;
  EXPECT_NE(text.find(" ms, left out)"), std::string::npos) << text;
  EXPECT_NE(text.find("linear          2,3,3,0,0,0,0,0"), std::string::npos)
      << text;
  // Three runs, each with its one kernel call.
  auto count = [&](const std::string &what) {
    size_t n = 0;
    for (size_t at = json.find(what); at != std::string::npos;
         at = json.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("\"name\": \"run project\""), 3u) << json;
  EXPECT_EQ(count("\"name\": \"linear\""), 3u) << json;
  EXPECT_EQ(json.rfind("\n]}\n"), json.size() - 4) << json;
  auto [code2, msg2] =
      take(tfm_session_write_profile(s, "/no/such/dir/p.json", TFM_PROFILE_TRACE));
  EXPECT_EQ(code2, TFM_STATUS_NOT_FOUND);
  tfm_tensor_release(x);
  tfm_session_release(plain);
  tfm_session_release(s);
  tfm_module_release(m);
}

TEST_F(SessionTest, TheWrapperDescribesAndRunsByName) {
  tfm::Context context(2);
  tfm::Module module(context, kDir + "/libfake_model.so");
  std::vector<tfm::EntryInfo> entries = module.entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].name, "infer");
  ASSERT_EQ(entries[0].inputs.size(), 2u);
  EXPECT_EQ(entries[0].inputs[1].name, "bias");
  EXPECT_EQ(entries[0].inputs[1].dims, std::vector<int64_t>{3});
  EXPECT_EQ(entries[0].inputs[1].maxDims, std::vector<int64_t>{3});
  ASSERT_EQ(entries[0].outputs.size(), 1u);
  EXPECT_EQ(entries[0].outputs[0].name, "y");
  EXPECT_EQ(entries[0].outputs[0].dtype, TFM_DTYPE_F32);
  tfm::Session session(module);
  EXPECT_EQ(session.device(), "cpu");
  // A model without kernel descriptors names only its device.
  EXPECT_EQ(session.describe(), "cpu");
  std::vector<float> xs = {1, 2, 3, 4, 5, 6}, bs = {0.5f, 0.25f, 0.125f},
                     ys(6);
  tfm::Tensor xt = tfm::Tensor::view(xs, {2, 3}),
              bt = tfm::Tensor::view(bs, {3}), yt = tfm::Tensor::view(ys, {2, 3});
  EXPECT_TRUE(xt.isView());
  auto rest = session.run("infer", {{"x", &xt}, {"bias", &bt}}, {},
                          {{"y", &yt}});
  EXPECT_TRUE(rest.empty());
  EXPECT_FLOAT_EQ(ys[5], 306.125f);
  auto named = session.run("infer", {{"x", &xt}, {"bias", &bt}});
  ASSERT_EQ(named.count("y"), 1u);
  EXPECT_FLOAT_EQ(named.at("y").data<float>()[0], 101.5f);
  try {
    session.run("infer", {{"x", &xt}});
    FAIL() << "a missing input must throw";
  } catch (const tfm::Error &e) {
    EXPECT_EQ(e.code(), TFM_STATUS_INVALID_ARGUMENT);
  }
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
