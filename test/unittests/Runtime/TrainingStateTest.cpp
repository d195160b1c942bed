//===- TrainingStateTest.cpp - Parameters and checkpoints of sessions -----===//
//
// Runs a tfmc-compiled training artifact (tiny_train.mlir, Adam) through the
// C API and its C++ wrapper: parameters by name, state per session, and
// checkpoints that restore a run exactly, never half-load, and never leave
// a partial file when the disk fills up.
//
//===----------------------------------------------------------------------===//

#include "tfm/runtime.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <sys/resource.h>

namespace {

const std::string kModel = TFM_TINY_TRAIN_SO;

struct Batch {
  tfm::Tensor x{TFM_DTYPE_F32, {4, 3}};
  tfm::Tensor labels{TFM_DTYPE_I64, {4}};
  Batch() {
    float *d = x.data<float>();
    for (int i = 0; i < 12; ++i)
      d[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
    int64_t *l = labels.data<int64_t>();
    l[0] = 1, l[1] = 4, l[2] = 0, l[3] = 2;
  }
};

float step(tfm::Session &s, Batch &b) {
  auto out = s.run("train_step", {&b.x, &b.labels});
  return out.at(0).data<float>()[0];
}

std::vector<float> values(tfm::Tensor t) {
  size_t n = 1;
  for (int64_t d : t.dims())
    n *= static_cast<size_t>(d);
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

std::string tempPath(const char *name) {
  return ::testing::TempDir() + "tfm_" + name;
}

TEST(TrainingState, ParametersByName) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session s(m);
  EXPECT_EQ(s.parameterNames(), (std::vector<std::string>{"w", "b"}));
  std::vector<float> b = values(s.parameter("b"));
  ASSERT_EQ(b.size(), 5u);
  EXPECT_FLOAT_EQ(b[0], 0.1f);
  EXPECT_FLOAT_EQ(b[2], -0.1f);
  // Set, read back, and a wrong shape or name is refused.
  tfm::Tensor zeros(TFM_DTYPE_F32, {5});
  for (int i = 0; i < 5; ++i)
    zeros.data<float>()[i] = 0.0f;
  s.setParameter("b", zeros);
  EXPECT_EQ(values(s.parameter("b")), std::vector<float>(5, 0.0f));
  tfm::Tensor wrong(TFM_DTYPE_F32, {4});
  EXPECT_THROW(s.setParameter("b", wrong), tfm::Error);
  EXPECT_THROW(s.parameter("nope"), tfm::Error);
}

TEST(TrainingState, StepsUpdateOnlyTheirSession) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session a(m), b(m);
  Batch batch;
  std::vector<float> before = values(a.parameter("w"));
  float l1 = step(a, batch);
  float l2 = step(a, batch);
  EXPECT_LT(l2, l1); // Adam on one batch descends
  EXPECT_EQ(a.stepCount(), 2);
  EXPECT_NE(values(a.parameter("w")), before);
  // The other session still has the initial state.
  EXPECT_EQ(b.stepCount(), 0);
  EXPECT_EQ(values(b.parameter("w")), before);
  EXPECT_FLOAT_EQ(step(b, batch), l1);
  // infer reads the trained parameters.
  auto logitsA = a.run("infer", {&batch.x});
  auto logitsB = b.run("infer", {&batch.x});
  EXPECT_NE(values(std::move(logitsA[0])), values(std::move(logitsB[0])));
}

// A training step stopped by its timeout or cancel flag leaves the state
// as it was, the step count included (the step's code advances it before
// its first kernel), so the run that follows is the one that would have.
TEST(TrainingState, AnInterruptedStepChangesNothing) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session s(m), reference(m);
  Batch batch;
  step(s, batch);
  step(reference, batch);
  std::vector<float> w = values(s.parameter("w"));
  tfm::CancelFlag flag;
  flag.raise();
  for (const tfm::RunOptions &options :
       {tfm::RunOptions().timeoutMs(1e-9), tfm::RunOptions().cancelWith(flag)}) {
    try {
      s.run("train_step", {{"x", &batch.x}, {"labels", &batch.labels}},
            options);
      FAIL() << "the step must stop";
    } catch (const tfm::Error &e) {
      EXPECT_TRUE(e.code() == TFM_STATUS_DEADLINE_EXCEEDED ||
                  e.code() == TFM_STATUS_CANCELLED)
          << e.what();
    }
    EXPECT_EQ(s.stepCount(), 1);
    EXPECT_EQ(values(s.parameter("w")), w);
  }
  EXPECT_EQ(step(s, batch), step(reference, batch));
  EXPECT_EQ(values(s.parameter("w")), values(reference.parameter("w")));
  EXPECT_EQ(s.stepCount(), 2);
}

TEST(TrainingState, CheckpointRestoresTheRunExactly) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session s(m);
  Batch batch;
  step(s, batch);
  step(s, batch);
  std::string path = tempPath("ckpt");
  s.saveCheckpoint(path);
  std::vector<float> w = values(s.parameter("w"));
  float next = step(s, batch);
  float after = step(s, batch);

  tfm::Session fresh(m);
  fresh.loadCheckpoint(path);
  EXPECT_EQ(fresh.stepCount(), 2);
  EXPECT_EQ(values(fresh.parameter("w")), w);
  // Moments and step count came back too: the next steps are identical.
  EXPECT_EQ(step(fresh, batch), next);
  EXPECT_EQ(step(fresh, batch), after);
  std::remove(path.c_str());
}

TEST(TrainingState, BadCheckpointsChangeNothing) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session s(m);
  Batch batch;
  step(s, batch);
  std::string path = tempPath("ckpt_bad");
  s.saveCheckpoint(path);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();

  tfm::Session other(m);
  std::vector<float> w = values(other.parameter("w"));
  auto expectRefused = [&](const std::string &content,
                           tfm_status_code_t code) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    tfm_status_t st = tfm_session_load_checkpoint(other.get(), path.c_str());
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(tfm_status_code(st), code) << tfm_status_message(st);
    tfm_status_free(st);
    EXPECT_EQ(values(other.parameter("w")), w);
    EXPECT_EQ(other.stepCount(), 0);
  };
  expectRefused(bytes.substr(0, bytes.size() / 2), TFM_STATUS_DATA_LOSS);
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x40;
  expectRefused(flipped, TFM_STATUS_DATA_LOSS);
  expectRefused("not a checkpoint", TFM_STATUS_DATA_LOSS);
  std::remove(path.c_str());

  // A missing file, and a folder that cannot hold the file.
  tfm_status_t st = tfm_session_load_checkpoint(other.get(), path.c_str());
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(tfm_status_code(st), TFM_STATUS_NOT_FOUND);
  tfm_status_free(st);
  EXPECT_THROW(s.saveCheckpoint("/nonexistent-dir/ckpt"), tfm::Error);
}

// A write that runs out of room (a file size limit makes every write past
// 64 bytes fail, as a full disk would) fails the save, keeps the previous
// checkpoint whole, and leaves no temporary file behind.
TEST(TrainingState, FullDiskKeepsThePreviousCheckpoint) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session s(m);
  Batch batch;
  step(s, batch);
  namespace fs = std::filesystem;
  fs::path dir = fs::path(tempPath("full_disk"));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string path = (dir / "ckpt").string();
  s.saveCheckpoint(path);
  std::vector<float> saved = values(s.parameter("w"));
  step(s, batch);

  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto previous = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit tight = old;
  tight.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tight), 0);
  tfm_status_t st = tfm_session_save_checkpoint(s.get(), path.c_str());
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(tfm_status_code(st), TFM_STATUS_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(tfm_status_message(st)).find("cannot write the checkpoint"),
            std::string::npos)
      << tfm_status_message(st);
  tfm_status_free(st);

  std::vector<std::string> names;
  for (const auto &e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"ckpt"});
  tfm::Session fresh(m);
  fresh.loadCheckpoint(path);
  EXPECT_EQ(fresh.stepCount(), 1);
  EXPECT_EQ(values(fresh.parameter("w")), saved);
  fs::remove_all(dir);
}

} // namespace
