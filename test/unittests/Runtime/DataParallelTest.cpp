//===- DataParallelTest.cpp - Sessions as ranks of a data-parallel run ----===//
//
// Two sessions in two threads stand for two processes, joined by a
// communicator made here (a rendezvous in memory), so that the runtime's
// side of data-parallel training is tested without MPI: the two halves of
// a batch step as one session on the whole batch does, the parameters are
// copied from rank 0 at the start, a rank with another model is named,
// a model without the data-parallel form is refused, an exchange that
// never completes fails the step after the timeout, and Adam's moments
// sharded across the ranks (--shard-optimizer) give the same steps, save
// whole and come back whole when the ranks part. test/tfmc's
// train-data-parallel.test runs the same through mpirun.
//
//===----------------------------------------------------------------------===//

#include "MemoryWorld.h"
#include "tfm/runtime.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace {

const std::string kModel = TFM_TINY_TRAIN_SO;

/// tiny_train's inputs: x [4, 3] and labels [4]; `rows` of the batch kept,
/// the others' labels ignored (-100), as tfmc pads a rank's part.
struct Batch {
  tfm::Tensor x{TFM_DTYPE_F32, {4, 3}};
  tfm::Tensor labels{TFM_DTYPE_I64, {4}};
  explicit Batch(std::vector<int> rows = {0, 1, 2, 3}) {
    const int64_t all[4] = {1, 4, 0, 2};
    for (int i = 0; i < 12; ++i)
      x.data<float>()[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
    for (int i = 0; i < 4; ++i)
      labels.data<int64_t>()[i] = -100;
    for (int r : rows)
      labels.data<int64_t>()[r] = all[r];
  }
};

float step(tfm::Session &s, Batch &b) {
  return s.run("train_step", {{"x", &b.x}, {"labels", &b.labels}})
      .at("loss")
      .data<float>()[0];
}

std::vector<float> values(tfm::Tensor t) {
  size_t n = 1;
  for (int64_t d : t.dims())
    n *= static_cast<size_t>(d);
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

/// Expects `s` to refuse `c` as an invalid argument, saying `why`.
void expectRefused(tfm::Session &s, tfm_communicator_t &c,
                   const std::string &why) {
  try {
    s.setCommunicator(&c);
    ADD_FAILURE() << "the communicator was taken";
  } catch (const tfm::Error &e) {
    EXPECT_EQ(e.code(), TFM_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(DataParallel, TwoRanksStepAsOneSessionOnTheWholeBatch) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session one(m);
  Batch whole;
  std::vector<float> oracle;
  for (int i = 0; i < 5; ++i)
    oracle.push_back(step(one, whole));

  // Rank 1 starts from other parameters: joining copies rank 0's. The
  // ranks' parts are uneven: 3 labels against 1.
  MemoryWorld world(2);
  std::vector<std::vector<float>> losses(2);
  std::vector<std::vector<float>> w(2);
  std::vector<std::string> failures(2);
  onRanks(2, [&](int rank) {
    try {
      tfm::Session s(m);
      if (rank == 1) {
        tfm::Tensor zeros(TFM_DTYPE_F32, {5});
        std::memset(zeros.data<float>(), 0, 5 * sizeof(float));
        s.setParameter("b", zeros);
      }
      tfm_communicator_t c = world.communicator(rank);
      s.setCommunicator(&c);
      Batch part(rank == 0 ? std::vector<int>{0, 1, 3} : std::vector<int>{2});
      for (int i = 0; i < 5; ++i)
        losses[rank].push_back(step(s, part));
      w[rank] = values(s.parameter("w"));
    } catch (const std::exception &e) {
      failures[rank] = e.what();
    }
  });
  ASSERT_EQ(failures, (std::vector<std::string>{"", ""}));
  for (int rank = 0; rank < 2; ++rank)
    for (int i = 0; i < 5; ++i)
      EXPECT_NEAR(losses[rank][i], oracle[i], 1e-6 * std::abs(oracle[i]))
          << "rank " << rank << " step " << i + 1;
  EXPECT_EQ(w[0], w[1]);
  std::vector<float> ow = values(one.parameter("w"));
  for (size_t i = 0; i < ow.size(); ++i)
    EXPECT_NEAR(w[0][i], ow[i], 1e-6);
}

TEST(DataParallel, ARankWithoutLabelsAddsNothing) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  tfm::Session one(m);
  Batch whole;
  float oracle = step(one, whole);
  MemoryWorld world(2);
  std::vector<float> loss(2);
  onRanks(2, [&](int rank) {
    tfm::Session s(m);
    tfm_communicator_t c = world.communicator(rank);
    s.setCommunicator(&c);
    Batch part(rank == 0 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{});
    loss[rank] = step(s, part);
  });
  EXPECT_NEAR(loss[0], oracle, 1e-6 * std::abs(oracle));
  EXPECT_EQ(loss[0], loss[1]);
}

TEST(DataParallel, EveryRankDrawsItsOwnDropoutMasks) {
  tfm::Context ctx;
  tfm::Module m(ctx, TFM_TINY_DROPOUT_SO);
  std::vector<float> alone;
  {
    tfm::Session s(m);
    Batch whole;
    for (int i = 0; i < 3; ++i)
      alone.push_back(step(s, whole));
  }
  // Rank 0 of one draws what a session alone does, bit for bit.
  {
    tfm::Session s(m);
    MemoryWorld world(1);
    tfm_communicator_t c = world.communicator(0);
    s.setCommunicator(&c);
    Batch whole;
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(step(s, whole), alone[i]) << "step " << i + 1;
  }
  // Two ranks on the same rows: with one stream their average would be
  // the session alone; rank 1's own masks make every step's loss differ.
  MemoryWorld world(2);
  std::vector<std::vector<float>> losses(2);
  onRanks(2, [&](int rank) {
    tfm::Session s(m);
    tfm_communicator_t c = world.communicator(rank);
    s.setCommunicator(&c);
    Batch whole;
    for (int i = 0; i < 3; ++i)
      losses[rank].push_back(step(s, whole));
  });
  EXPECT_EQ(losses[0], losses[1]);
  for (int i = 0; i < 3; ++i)
    EXPECT_GT(std::abs(losses[0][i] - alone[i]), 1e-4f * std::abs(alone[i]))
        << "step " << i + 1 << ": rank 1 drew rank 0's masks";
}

TEST(DataParallel, ARankWhoseParametersDriftedIsNamed) {
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  MemoryWorld world(2);
  std::vector<std::string> before(2), after(2);
  onRanks(2, [&](int rank) {
    tfm::Session s(m);
    tfm_communicator_t c = world.communicator(rank);
    s.setCommunicator(&c);
    auto compare = [&](std::string &out) {
      try {
        tfm::check(tfm_session_compare_parameters(s.get()));
      } catch (const tfm::Error &e) {
        out = e.what();
      }
    };
    compare(before[rank]);
    if (rank == 1) {
      tfm::Tensor b = s.parameter("b");
      b.data<float>()[3] += 1e-6f;
      s.setParameter("b", b);
    }
    compare(after[rank]);
  });
  EXPECT_EQ(before, (std::vector<std::string>{"", ""}));
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_NE(after[rank].find("the parameters of rank(s) 1 differ"),
              std::string::npos)
        << after[rank];
}

TEST(DataParallel, ARankWithAnotherModelIsNamed) {
  // The same library with a byte more: it loads, but it is not the same.
  std::string other = ::testing::TempDir() + "tfm_other_tiny_train.so";
  std::filesystem::copy_file(kModel, other,
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(other, std::ios::app) << '\0';
  tfm::Context ctx;
  MemoryWorld world(2);
  std::vector<std::string> errors(2);
  onRanks(2, [&](int rank) {
    tfm::Module m(ctx, rank == 1 ? other : kModel);
    tfm::Session s(m);
    tfm_communicator_t c = world.communicator(rank);
    try {
      s.setCommunicator(&c);
    } catch (const tfm::Error &e) {
      errors[rank] = e.what();
    }
  });
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_NE(errors[rank].find("the model library of rank(s) 1 differs"),
              std::string::npos)
        << errors[rank];
  std::filesystem::remove(other);
}

TEST(DataParallel, AModelWithoutTheFormIsRefused) {
  tfm::Context ctx;
  tfm::Module m(ctx, TFM_GENERATION_SO);
  tfm::Session s(m);
  MemoryWorld world(1);
  tfm_communicator_t c = world.communicator(0);
  expectRefused(s, c, "averages nothing across processes");
}

TEST(DataParallel, AnExchangeThatNeverEndsFailsTheStep) {
  // Rank 1 joins but never steps, so rank 0's first bucket waits forever.
  setenv("TFM_COLLECTIVE_TIMEOUT", "0.5", 1);
  tfm::Context ctx;
  tfm::Module m(ctx, kModel);
  // Outlives the test: rank 0's exchange thread stays blocked in it.
  auto *world = new MemoryWorld(2);
  std::string error;
  tfm::Session *rank0 = nullptr;
  onRanks(2, [&](int rank) {
    tfm_communicator_t c = world->communicator(rank);
    if (rank == 0) {
      rank0 = new tfm::Session(m);
      rank0->setCommunicator(&c);
    } else {
      tfm::Session s(m);
      s.setCommunicator(&c);
    }
  });
  Batch batch;
  try {
    step(*rank0, batch);
  } catch (const tfm::Error &e) {
    error = e.what();
  }
  unsetenv("TFM_COLLECTIVE_TIMEOUT");
  EXPECT_NE(error.find("did not finish within 0.5 s"), std::string::npos)
      << error;
  // The communicator knows who never came.
  EXPECT_NE(error.find("rank(s) 1 of 2 stopped answering or never reached "
                       "it"),
            std::string::npos)
      << error;
  // Later steps say the ranks are out of step instead of waiting again.
  try {
    step(*rank0, batch);
    ADD_FAILURE() << "a step ran after a failed exchange";
  } catch (const tfm::Error &e) {
    EXPECT_NE(std::string(e.what()).find("out of step"), std::string::npos)
        << e.what();
  }
  delete rank0;
}

} // namespace

TEST(DataParallel, ShardedMomentsStepAsOneSession) {
  tfm::Context ctx;
  tfm::Module plain(ctx, kModel), sharded(ctx, TFM_TINY_TRAIN_SHARDED_SO);
  tfm::Session one(plain);
  Batch whole;
  std::vector<float> oracle;
  for (int i = 0; i < 6; ++i)
    oracle.push_back(step(one, whole));

  // Three ranks: w's 15 elements part 5, 5, 5 and b's 5 part 2, 2, 1. After
  // 3 steps every rank saves (rank 0 writes the moments whole), and the
  // ranks part, each with the whole moments again.
  std::string ckpt = ::testing::TempDir() + "tfm_sharded_moments.ckpt";
  MemoryWorld world(3);
  std::vector<std::vector<float>> losses(3), w(3);
  std::vector<float> alone(3);
  std::vector<std::string> failures(3);
  onRanks(3, [&](int rank) {
    try {
      tfm::Session s(sharded);
      tfm_communicator_t c = world.communicator(rank);
      s.setCommunicator(&c);
      Batch part(rank == 0   ? std::vector<int>{0, 1}
                 : rank == 1 ? std::vector<int>{2}
                             : std::vector<int>{3});
      for (int i = 0; i < 3; ++i)
        losses[rank].push_back(step(s, part));
      tfm::check(tfm_session_save_checkpoint(s.get(), rank == 0 ? ckpt.c_str()
                                                                : nullptr));
      w[rank] = values(s.parameter("w"));
      s.setCommunicator(nullptr);
      alone[rank] = step(s, whole);
    } catch (const std::exception &e) {
      failures[rank] = e.what();
    }
  });
  ASSERT_EQ(failures, (std::vector<std::string>{"", "", ""}));
  for (int rank = 0; rank < 3; ++rank) {
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(losses[rank][i], oracle[i], 1e-6 * std::abs(oracle[i]))
          << "rank " << rank << " step " << i + 1;
    EXPECT_EQ(w[rank], w[0]) << "rank " << rank;
    // Alone again, with every rank's part of the moments.
    EXPECT_NEAR(alone[rank], oracle[3], 1e-6 * std::abs(oracle[3]))
        << "rank " << rank;
  }
  // The checkpoint holds the moments whole: the unsharded artifact resumes
  // it, and so does the sharded one in one process.
  for (const tfm::Module *m : {&plain, &sharded}) {
    tfm::Session s(*m);
    s.loadCheckpoint(ckpt);
    EXPECT_NEAR(step(s, whole), oracle[3], 1e-6 * std::abs(oracle[3]));
    EXPECT_NEAR(step(s, whole), oracle[4], 1e-6 * std::abs(oracle[4]));
  }
  std::filesystem::remove(ckpt);
}

TEST(DataParallel, ShardedMomentsNeedAllGather) {
  tfm::Context ctx;
  tfm::Module m(ctx, TFM_TINY_TRAIN_SHARDED_SO);
  tfm::Session s(m);
  MemoryWorld world(1);
  tfm_communicator_t c = world.communicator(0);
  c.all_gather = nullptr;
  expectRefused(s, c, "needs the communicator's all_gather");
}
