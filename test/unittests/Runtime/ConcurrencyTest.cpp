//===- ConcurrencyTest.cpp - Sessions on many threads ---------------------===//
//
// What runtime.h promises about threads, on real tfmc-compiled models:
// - a module is shared freely: sessions of one module, on many threads at
//   once, give each the outputs a lone session gives;
// - a session's training state is its own: concurrent training sessions
//   follow the trajectory of a lone one, step for step;
// - one session shared by many threads serves one call at a time: each call
//   either runs whole, with the right outputs, or fails with
//   FAILED_PRECONDITION and changes nothing, so the step count equals the
//   number of steps that succeeded;
// - a context's thread count holds for all its sessions do, whatever the
//   calling thread's OpenMP setting, which stays as it was.
// The suite runs in every build; scripts/tsan.sh runs it under
// ThreadSanitizer, which checks the runtime's own synchronization.
//
//===----------------------------------------------------------------------===//

#include "tfm/runtime.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

namespace {

const std::string kEncoder = TFM_LENGTHS_SO;
const std::string kTrain = TFM_TINY_TRAIN_SO;
const std::string kGpt = TFM_GENERATION_EXAMPLE_SO;
constexpr int64_t kBatch = 2, kWidth = 32;
constexpr int kThreads = 6, kRounds = 4;
const int64_t kLengths[] = {5, 17, 32, 40};

tfm::Tensor encoderInput(int64_t length) {
  tfm::Tensor t(TFM_DTYPE_F32, {kBatch, length, kWidth});
  float *x = t.data<float>();
  for (int64_t i = 0; i < kBatch * length * kWidth; ++i)
    x[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i + length)));
  return t;
}

std::vector<float> values(tfm::Tensor &t) {
  size_t n = 1;
  for (int64_t d : t.dims())
    n *= static_cast<size_t>(d);
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

/// The outputs of a lone session, one per length.
std::map<int64_t, std::vector<float>> loneOutputs(const tfm::Module &m) {
  tfm::Session s(m);
  std::map<int64_t, std::vector<float>> out;
  for (int64_t length : kLengths) {
    tfm::Tensor x = encoderInput(length);
    std::vector<tfm::Tensor> y = s.run("infer", {&x});
    out[length] = values(y.at(0));
  }
  return out;
}

/// The threads of this process.
size_t processThreads() {
  size_t n = 0;
  for ([[maybe_unused]] const auto &task :
       std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

/// Runs `body(thread)` on kThreads threads started together.
template <typename Body> void onThreads(Body body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads)
        std::this_thread::yield();
      body(t);
    });
  for (std::thread &t : threads)
    t.join();
}

// Two threads per core: each session's kernels fork their own OpenMP team.
TEST(Concurrency, SessionsOfOneModuleOnManyThreads) {
  tfm::Context ctx(2);
  tfm::Module m(ctx, kEncoder);
  std::map<int64_t, std::vector<float>> expected = loneOutputs(m);
  std::atomic<int> mismatches{0}, failures{0};
  onThreads([&](int t) {
    try {
      tfm::Session s(m);
      for (int r = 0; r < kRounds; ++r)
        for (int i = 0; i < 4; ++i) {
          int64_t length = kLengths[(i + t) % 4];
          tfm::Tensor x = encoderInput(length);
          std::vector<tfm::Tensor> y = s.run("infer", {&x});
          if (values(y.at(0)) != expected.at(length))
            ++mismatches;
        }
    } catch (const tfm::Error &e) {
      ADD_FAILURE() << "thread " << t << ": " << e.what();
      ++failures;
    }
  });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "a concurrent run's outputs differ from "
                                     "a lone session's";
}

// Loading and releasing the same library from many threads: the loader
// shares one mapping, and each module validates and owns its metadata.
TEST(Concurrency, ModulesLoadAndReleaseOnManyThreads) {
  tfm::Context ctx(1);
  std::map<int64_t, std::vector<float>> expected;
  {
    tfm::Module m(ctx, kEncoder);
    expected = loneOutputs(m);
  }
  std::atomic<int> mismatches{0};
  onThreads([&](int t) {
    for (int r = 0; r < kRounds; ++r) {
      tfm::Module m(ctx, kEncoder);
      tfm::Session s(m);
      int64_t length = kLengths[(r + t) % 4];
      tfm::Tensor x = encoderInput(length);
      std::vector<tfm::Tensor> y = s.run("infer", {&x});
      if (values(y.at(0)) != expected.at(length))
        ++mismatches;
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
}

struct Batch {
  tfm::Tensor x{TFM_DTYPE_F32, {4, 3}};
  tfm::Tensor labels{TFM_DTYPE_I64, {4}};
  Batch() {
    float *d = x.data<float>();
    for (int i = 0; i < 12; ++i)
      d[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    int64_t *l = labels.data<int64_t>();
    l[0] = 3, l[1] = 0, l[2] = 4, l[3] = 1;
  }
};

constexpr int kSteps = 12;

TEST(Concurrency, TrainingSessionsKeepTheirOwnState) {
  tfm::Context ctx(1);
  tfm::Module m(ctx, kTrain);
  std::vector<float> lone;
  {
    tfm::Session s(m);
    Batch b;
    for (int i = 0; i < kSteps; ++i)
      lone.push_back(s.run("train_step", {&b.x, &b.labels}).at(0).data<float>()[0]);
  }
  std::vector<std::vector<float>> losses(kThreads);
  std::vector<int64_t> steps(kThreads);
  onThreads([&](int t) {
    tfm::Session s(m);
    Batch b;
    for (int i = 0; i < kSteps; ++i)
      losses[t].push_back(
          s.run("train_step", {&b.x, &b.labels}).at(0).data<float>()[0]);
    steps[t] = s.stepCount();
  });
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(losses[t], lone) << "thread " << t;
    EXPECT_EQ(steps[t], kSteps) << "thread " << t;
  }
}

// The chosen behaviour for a shared session: no queueing, no locking
// around compiled code; a call that finds the session busy fails at once.
TEST(Concurrency, ASharedSessionServesOneCallAtATime) {
  tfm::Context ctx(1);
  tfm::Module m(ctx, kEncoder);
  std::map<int64_t, std::vector<float>> expected = loneOutputs(m);
  tfm::Session shared(m);
  std::atomic<int> ran{0}, busy{0}, wrong{0};
  onThreads([&](int t) {
    for (int r = 0; r < 4 * kRounds; ++r) {
      int64_t length = kLengths[(r + t) % 4];
      tfm::Tensor x = encoderInput(length);
      try {
        std::vector<tfm::Tensor> y = shared.run("infer", {&x});
        ++ran;
        if (values(y.at(0)) != expected.at(length))
          ++wrong;
      } catch (const tfm::Error &e) {
        if (e.code() == TFM_STATUS_FAILED_PRECONDITION)
          ++busy;
        else
          ADD_FAILURE() << "thread " << t << ": " << e.what();
      }
    }
  });
  std::printf("%d calls ran, %d found the session busy\n", ran.load(),
              busy.load());
  EXPECT_EQ(ran + busy, kThreads * 4 * kRounds);
  EXPECT_GT(ran.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Concurrency, ASharedTrainingSessionCountsOnlyTheStepsThatRan) {
  tfm::Context ctx(1);
  tfm::Module m(ctx, kTrain);
  tfm::Session shared(m);
  std::atomic<int> ran{0}, busy{0};
  onThreads([&](int t) {
    Batch b;
    for (int i = 0; i < kSteps; ++i) {
      try {
        shared.run("train_step", {&b.x, &b.labels});
        ++ran;
      } catch (const tfm::Error &e) {
        if (e.code() == TFM_STATUS_FAILED_PRECONDITION)
          ++busy;
        else
          ADD_FAILURE() << "thread " << t << ": " << e.what();
      }
    }
  });
  std::printf("%d steps ran, %d found the session busy\n", ran.load(),
              busy.load());
  EXPECT_EQ(ran + busy, kThreads * kSteps);
  EXPECT_EQ(shared.stepCount(), ran.load());
  // The parameters are those of a lone session after as many steps.
  tfm::Session lone(m);
  Batch b;
  for (int i = 0; i < ran.load(); ++i)
    lone.run("train_step", {&b.x, &b.labels});
  for (const std::string &name : lone.parameterNames()) {
    tfm::Tensor a = lone.parameter(name), c = shared.parameter(name);
    EXPECT_EQ(values(a), values(c)) << name;
  }
}

// oneDNN splits a primitive's work for the threads it is created with and
// runs it on as many, so the kernels a session creates follow the context's
// count too; they used to follow the calling thread's, and a one-thread
// context ran its GEMMs on four. GPT's 2,048-row GEMMs are ones oneDNN
// splits whenever it has threads to split them over.
TEST(Concurrency, AOneThreadContextRunsOnTheCallingThreadAlone) {
  omp_set_num_threads(4);
  size_t before = processThreads();
  tfm::Context ctx(1);
  tfm::Module m(ctx, kGpt);
  tfm::Session s(m);
  tfm::Tensor ids(TFM_DTYPE_I64, {32, 64});
  for (int64_t i = 0; i < 32 * 64; ++i)
    ids.data<int64_t>()[i] = i % 40;
  for (int r = 0; r < 2; ++r)
    s.run("infer", {&ids});
  EXPECT_EQ(processThreads(), before) << "the session started threads";
  EXPECT_EQ(omp_get_max_threads(), 4) << "the caller's setting changed";
}

} // namespace
