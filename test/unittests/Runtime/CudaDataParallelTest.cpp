//===- CudaDataParallelTest.cpp - Data-parallel sessions on a GPU ---------===//
//
// Without a GPU: the stand-in driver (whose device memory is host memory)
// and the stand-in NCCL (one rank computes; several only meet). Checked
// here: the communicator over NCCL on host and device memory, the TCP
// rendezvous that gives its ranks NCCL's unique id (processes forked
// here), and GPU sessions in threads that average a model's buckets
// through a communicator on their stream, weighted as on the CPU.
// scripts/gpu-check.sh's pack runs NCCL itself on a GPU.
//
//===----------------------------------------------------------------------===//

#include "MemoryWorld.h"
#include "tfm/runtime.hpp"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string messageOf(tfm_status_t s) {
  if (!s)
    return "";
  std::string m = tfm_status_message(s);
  tfm_status_free(s);
  return m;
}

/// The stand-ins, and a log of their calls at `log` (emptied).
void useStandIns(const std::string &log = "") {
  setenv("TFM_CUDA_DRIVER", TFM_FAKE_CUDA_DRIVER, 1);
  setenv("TFM_NCCL_LIBRARY", TFM_FAKE_NCCL, 1);
  unsetenv("TFM_FAKE_NCCL_FAIL");
  unsetenv("TFM_FAKE_NCCL_HANG");
  if (log.empty()) {
    unsetenv("TFM_FAKE_CUDA_LOG");
    return;
  }
  std::remove(log.c_str());
  setenv("TFM_FAKE_CUDA_LOG", log.c_str(), 1);
}

/// A job of `size` processes meeting at 127.0.0.1:`port`, as this one's
/// rank `rank`; port 0 leaves TFM_RENDEZVOUS unset.
void placeRank(int rank, int size, int port) {
  setenv("TFM_RANK", std::to_string(rank).c_str(), 1);
  setenv("TFM_WORLD_SIZE", std::to_string(size).c_str(), 1);
  if (port)
    setenv("TFM_RENDEZVOUS", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
  else
    unsetenv("TFM_RENDEZVOUS");
}

/// A TCP port nothing listens on now.
int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t n = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &n);
  close(fd);
  return ntohs(a.sin_port);
}

std::vector<std::string> linesOf(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

bool contains(const std::vector<std::string> &lines, const std::string &line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

} // namespace

TEST(NcclCommunicator, OneRankComputesOnHostMemory) {
  std::string log = ::testing::TempDir() + "nccl_host.log";
  useStandIns(log);
  placeRank(0, 1, 0);
  tfm_communicator_t c{};
  ASSERT_EQ(messageOf(tfm_nccl_communicator(0, nullptr, &c)), "");
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.size, 1);
  EXPECT_EQ(c.device_memory, 1);
  char error[256] = {0};
  std::vector<float> x = {1, 2, 3};
  EXPECT_EQ(c.all_reduce_sum(c.user, x.data(), 3, TFM_DTYPE_F32, nullptr, error,
                             sizeof error),
            0)
      << error;
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(c.all_reduce_scaled_sum(c.user, x.data(), 3, TFM_DTYPE_F32, 0.25,
                                    nullptr, error, sizeof error),
            0)
      << error;
  EXPECT_EQ(x, (std::vector<float>{0.25f, 0.5f, 0.75f}));
  // In place, as the session asks: the sum lands in the first block.
  std::vector<float> blocks = {4, 5};
  EXPECT_EQ(c.reduce_scatter_sum(c.user, blocks.data(), blocks.data(), 2,
                                 TFM_DTYPE_F32, nullptr, error, sizeof error),
            0)
      << error;
  EXPECT_EQ(blocks, (std::vector<float>{4, 5}));
  EXPECT_NE(c.all_reduce_sum(c.user, x.data(), 3, TFM_DTYPE_BOOL, nullptr,
                             error, sizeof error),
            0);
  EXPECT_EQ(std::string(error), "NCCL sums no bool");
  tfm_nccl_communicator_destroy(&c);
  std::vector<std::string> lines = linesOf(log);
  EXPECT_TRUE(contains(lines, "nccl init rank 0 of 1 id -"));
  // Host memory travels on the communicator's own stream.
  EXPECT_TRUE(contains(lines, "nccl all_reduce 3 type 7 op 0 on a stream"));
  EXPECT_TRUE(
      contains(lines, "nccl all_reduce 3 type 7 op 5 scale 0.25 on a stream"));
  EXPECT_TRUE(contains(lines, "nccl destroy"));
}

TEST(NcclCommunicator, SaysWhatTheEnvironmentLacks) {
  useStandIns();
  tfm_communicator_t c{};
  unsetenv("TFM_WORLD_SIZE");
  EXPECT_NE(messageOf(tfm_nccl_communicator(0, nullptr, &c))
                .find("TFM_WORLD_SIZE is not set"),
            std::string::npos);
  placeRank(5, 2, 0);
  EXPECT_NE(messageOf(tfm_nccl_communicator(0, nullptr, &c))
                .find("TFM_RANK='5' is not a rank of a world of 2"),
            std::string::npos);
  placeRank(0, 2, 0);
  EXPECT_NE(messageOf(tfm_nccl_communicator(0, nullptr, &c))
                .find("TFM_RENDEZVOUS is not set"),
            std::string::npos);
  placeRank(0, 1, 0);
  EXPECT_NE(messageOf(tfm_nccl_communicator(3, nullptr, &c))
                .find("there is no GPU cuda:3; this machine has 1"),
            std::string::npos);
}

// Rank 0 here, rank 1 in a child process: both reach NCCL's
// initialization with the id rank 0 drew.
TEST(NcclCommunicator, RanksMeetWhereTheEnvironmentSays) {
  std::string log = ::testing::TempDir() + "nccl_meet.log";
  useStandIns(log);
  int port = freePort();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    placeRank(1, 2, port);
    tfm_communicator_t c{};
    tfm_status_t s = tfm_nccl_communicator(0, nullptr, &c);
    _exit(s ? 1 : 0);
  }
  placeRank(0, 2, port);
  tfm_communicator_t c{};
  EXPECT_EQ(messageOf(tfm_nccl_communicator(0, nullptr, &c)), "");
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string id = "fake-" + std::to_string(getpid());
  std::vector<std::string> lines = linesOf(log);
  EXPECT_TRUE(contains(lines, "nccl init rank 0 of 2 id " + id));
  EXPECT_TRUE(contains(lines, "nccl init rank 1 of 2 id " + id));
  // The stand-in joins no processes: a collective of two fails, saying so.
  char error[256] = {0};
  float x = 1;
  EXPECT_NE(c.all_reduce_sum(c.user, &x, 1, TFM_DTYPE_F32, nullptr, error,
                             sizeof error),
            0);
  EXPECT_NE(std::string(error).find("rank 0 of 2: NCCL's all-reduce failed: "
                                    "invalid usage: the stand-in NCCL runs "
                                    "one rank alone"),
            std::string::npos)
      << error;
  tfm_nccl_communicator_destroy(&c);
}

TEST(NcclCommunicator, TheRendezvousNamesTheRanksThatDidNotCome) {
  useStandIns();
  placeRank(0, 3, freePort());
  setenv("TFM_COLLECTIVE_TIMEOUT", "0.5", 1);
  tfm_communicator_t c{};
  std::string message = messageOf(tfm_nccl_communicator(0, nullptr, &c));
  unsetenv("TFM_COLLECTIVE_TIMEOUT");
  EXPECT_NE(message.find("rank(s) 1, 2 did not arrive at 127.0.0.1:"),
            std::string::npos)
      << message;
}

// A world of 3 whose rank 2 never comes, and rank 1 twice: rank 0 refuses
// both claims, which end at once.
TEST(NcclCommunicator, TwoProcessesClaimingOneRankAreRefused) {
  useStandIns();
  setenv("TFM_COLLECTIVE_TIMEOUT", "20", 1);
  int port = freePort();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    placeRank(0, 3, port);
    tfm_communicator_t c{};
    tfm_status_t s = tfm_nccl_communicator(0, nullptr, &c);
    _exit(s && std::string(tfm_status_message(s))
                          .find("two processes claim rank 1") !=
                      std::string::npos
              ? 0
              : 1);
  }
  std::vector<pid_t> claims;
  for (int i = 0; i < 2; ++i) {
    pid_t p = fork();
    if (p == 0) {
      placeRank(1, 3, port);
      tfm_communicator_t c{};
      tfm_status_t s = tfm_nccl_communicator(0, nullptr, &c);
      _exit(s ? 1 : 0);
    }
    claims.push_back(p);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "rank 0 did not refuse the second claim";
  int refused = 0;
  for (pid_t p : claims) {
    waitpid(p, &status, 0);
    refused += WIFEXITED(status) && WEXITSTATUS(status) == 1;
  }
  EXPECT_EQ(refused, 2);
  unsetenv("TFM_COLLECTIVE_TIMEOUT");
}

namespace {

/// Rank 1 of a job of two meeting at `port`, in a child process: it joins,
/// then does what `then` says ("stop": stops itself, as a process that
/// cannot be scheduled; "die": ends at once, without leaving the job;
/// "leave": destroys its communicator, then ends; anything else: waits,
/// alive, never reaching a collective).
pid_t rankOne(int port, const std::string &then) {
  pid_t child = fork();
  if (child != 0)
    return child;
  placeRank(1, 2, port);
  tfm_communicator_t c{};
  if (tfm_nccl_communicator(0, nullptr, &c))
    _exit(1);
  if (then == "stop")
    raise(SIGSTOP);
  if (then == "die")
    _exit(0);
  if (then == "leave") {
    tfm_nccl_communicator_destroy(&c);
    _exit(0);
  }
  for (;;)
    pause();
}

/// Rank 0 of that job: meets rank 1, queues an all-reduce that spins (the
/// stand-in NCCL holds the streams), and waits for it with the
/// communicator's `wait`, within TFM_COLLECTIVE_TIMEOUT=`timeout`; returns
/// the wait's message, which says which way it ended (a timeout, a death).
std::string waitForAHungSum(int port, const char *timeout,
                            tfm_communicator_t &c,
                            const tfm_communicator_t *bootstrap = nullptr) {
  placeRank(0, 2, port);
  setenv("TFM_COLLECTIVE_TIMEOUT", timeout, 1);
  setenv("TFM_FAKE_NCCL_HANG", "1", 1);
  std::string made = messageOf(tfm_nccl_communicator(0, bootstrap, &c));
  unsetenv("TFM_COLLECTIVE_TIMEOUT");
  if (!made.empty())
    return made;
  // The stand-in driver's device memory is host memory, and it has one
  // stream: any pointer names it.
  int streamName = 0;
  void *stream = &streamName;
  std::vector<float> x = {1, 2};
  char error[1024] = {0};
  if (c.all_reduce_sum(c.user, x.data(), 2, TFM_DTYPE_F32, stream, error,
                       sizeof error))
    return std::string("the sum was not queued: ") + error;
  if (c.wait(c.user, stream, error, sizeof error) == 0)
    return "the wait returned";
  return error;
}

} // namespace

// NCCL's collectives never time out. A rank that is alive but never
// reaches the collective leaves rank 0 spinning until the timeout, which
// names it (it started fewer collectives), aborts NCCL's communicator, and
// fails every later call at once.
TEST(NcclCommunicator, AWaitThatTimesOutNamesTheRankBehind) {
  std::string log = ::testing::TempDir() + "nccl_hang.log";
  useStandIns(log);
  int port = freePort();
  pid_t child = rankOne(port, "wait");
  tfm_communicator_t c{};
  std::string message = waitForAHungSum(port, "1.5", c);
  EXPECT_NE(message.find("rank 0 of 2: the collectives on the stream did not "
                         "finish within 1.5 s (TFM_COLLECTIVE_TIMEOUT): "
                         "rank(s) 1 (behind: 0 collectives started to this "
                         "rank's 1); NCCL's communicator was aborted"),
            std::string::npos)
      << message;
  char ranks[64] = {0};
  ASSERT_TRUE(c.lagging);
  EXPECT_EQ(c.lagging(c.user, ranks, sizeof ranks), 0);
  EXPECT_EQ(std::string(ranks), "1");
  float x = 1;
  char error[1024] = {0};
  EXPECT_NE(c.all_reduce_sum(c.user, &x, 1, TFM_DTYPE_F32, nullptr, error,
                             sizeof error),
            0);
  EXPECT_EQ(std::string(error), message);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  tfm_nccl_communicator_destroy(&c);
  std::vector<std::string> lines = linesOf(log);
  EXPECT_TRUE(contains(lines, "nccl abort"));
  // The aborted communicator is not destroyed again, and nothing waited on
  // the held stream without a bound.
  EXPECT_FALSE(contains(lines, "nccl destroy"));
  EXPECT_FALSE(contains(lines, "synchronize would wait forever on a "
                               "collective that never finishes"));
  unsetenv("TFM_FAKE_NCCL_HANG");
}

namespace {

/// waitForAHungSum against a rank 1 that does `then`, cleaned up after.
std::string hungSumAgainst(const std::string &then, const char *timeout) {
  useStandIns();
  int port = freePort();
  pid_t child = rankOne(port, then);
  tfm_communicator_t c{};
  std::string message = waitForAHungSum(port, timeout, c);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  tfm_nccl_communicator_destroy(&c);
  unsetenv("TFM_FAKE_NCCL_HANG");
  return message;
}

} // namespace

// A rank whose process ends without leaving the job ends rank 0's wait
// by its closed connection, not by the timeout (120 s, which would say
// "did not finish within").
TEST(NcclCommunicator, ARankThatDiesEndsTheWaitAtOnce) {
  std::string message = hungSumAgainst("die", "120");
  EXPECT_NE(message.find("the collectives on the stream cannot finish: the "
                         "process of rank(s) 1 ended without leaving the job "
                         "(rank(s) 1 (its process ended))"),
            std::string::npos)
      << message;
}

// One that destroyed its communicator said goodbye: it finished, and did
// not die, so the wait runs to the timeout and says so.
TEST(NcclCommunicator, ARankThatLeftIsNotTakenForDead) {
  std::string message = hungSumAgainst("leave", "1.5");
  EXPECT_NE(message.find("did not finish within 1.5 s "
                         "(TFM_COLLECTIVE_TIMEOUT): rank(s) 1 (its process "
                         "finished)"),
            std::string::npos)
      << message;
}

// A stopped process sends no heartbeat: named as silent.
TEST(NcclCommunicator, ASilentRankIsNamed) {
  std::string message = hungSumAgainst("stop", "3");
  EXPECT_NE(message.find("did not finish within 3 s (TFM_COLLECTIVE_TIMEOUT): "
                         "rank(s) 1 (silent for "),
            std::string::npos)
      << message;
}

namespace {

/// One end of a bootstrap communicator of two processes over pipes, as
/// MPI's would be under mpirun: rank 0's broadcasts go down one pipe, and
/// an all-reduce (of int32s) trades the ranks' values through both.
struct PipeEnd {
  int rank, to, from;
};

bool readWhole(int fd, void *data, size_t bytes) {
  char *p = static_cast<char *>(data);
  while (bytes) {
    ssize_t n = read(fd, p, bytes);
    if (n <= 0)
      return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

tfm_communicator_t pipeBootstrap(PipeEnd &end) {
  tfm_communicator_t c{};
  c.struct_size = sizeof c;
  c.rank = end.rank;
  c.size = 2;
  c.user = &end;
  c.broadcast = [](void *user, void *data, uint64_t bytes, int32_t root, void *,
                   char *, size_t) -> int32_t {
    auto &e = *static_cast<PipeEnd *>(user);
    if (e.rank == root)
      return write(e.to, data, bytes) == static_cast<ssize_t>(bytes) ? 0 : -1;
    return readWhole(e.from, data, bytes) ? 0 : -1;
  };
  c.all_reduce_sum = [](void *user, void *data, uint64_t count,
                        tfm_dtype_t dtype, void *, char *, size_t) -> int32_t {
    auto &e = *static_cast<PipeEnd *>(user);
    std::vector<int32_t> other(count);
    auto *mine = static_cast<int32_t *>(data);
    if (dtype != TFM_DTYPE_I32 ||
        write(e.to, mine, count * 4) != static_cast<ssize_t>(count * 4) ||
        !readWhole(e.from, other.data(), count * 4))
      return -1;
    for (uint64_t i = 0; i < count; ++i)
      mine[i] += other[i];
    return 0;
  };
  return c;
}

} // namespace

// Ranks that met over a bootstrap communicator (MPI's, under mpirun) have
// the heartbeat too: rank 0 listens where the bootstrap says, and a rank
// that never reaches the collective is named at the timeout.
TEST(NcclCommunicator, RanksThatMetOverABootstrapNameTheRankBehind) {
  useStandIns();
  int down[2], up[2];
  ASSERT_EQ(pipe(down), 0);
  ASSERT_EQ(pipe(up), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    PipeEnd end{1, up[1], down[0]};
    tfm_communicator_t boot = pipeBootstrap(end), c{};
    if (tfm_nccl_communicator(0, &boot, &c))
      _exit(1);
    for (;;)
      pause();
  }
  PipeEnd end{0, down[1], up[0]};
  tfm_communicator_t boot = pipeBootstrap(end), c{};
  std::string message = waitForAHungSum(0, "1.5", c, &boot);
  EXPECT_NE(message.find("did not finish within 1.5 s "
                         "(TFM_COLLECTIVE_TIMEOUT): rank(s) 1 (behind: 0 "
                         "collectives started to this rank's 1)"),
            std::string::npos)
      << message;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  tfm_nccl_communicator_destroy(&c);
  unsetenv("TFM_FAKE_NCCL_HANG");
  for (int fd : {down[0], down[1], up[0], up[1]})
    close(fd);
}

// NCCL's own report of a lost peer ends the wait, saying so, before the
// timeout (the default, 300 s).
TEST(NcclCommunicator, NcclsRemoteErrorEndsTheWait) {
  useStandIns();
  placeRank(0, 1, 0);
  setenv("TFM_FAKE_NCCL_HANG", "remote", 1);
  tfm_communicator_t c{};
  ASSERT_EQ(messageOf(tfm_nccl_communicator(0, nullptr, &c)), "");
  float x = 1;
  char error[1024] = {0};
  EXPECT_NE(c.all_reduce_sum(c.user, &x, 1, TFM_DTYPE_F32, nullptr, error,
                             sizeof error),
            0);
  EXPECT_NE(std::string(error).find(
                "rank 0 of 1: a collective of host memory failed: NCCL found "
                "remote process exited or there was a network error"),
            std::string::npos)
      << error;
  tfm_nccl_communicator_destroy(&c);
  unsetenv("TFM_FAKE_NCCL_HANG");
}

namespace {

/// Runs fake_exchange_model's "average" on `a`, `b` and weight `w` in
/// `session`; returns the averages of a and b end to end.
std::vector<float> average(tfm::Session &session, std::vector<float> a,
                           std::vector<float> b, float w) {
  std::vector<float> weight = {w};
  tfm::Tensor ta = tfm::Tensor::view(a, {3}), tb = tfm::Tensor::view(b, {6}),
              tw = tfm::Tensor::view(weight, {1});
  auto out = session.run("average", {{"a", &ta}, {"b", &tb}, {"w", &tw}});
  std::vector<float> result;
  for (const char *name : {"a_average", "b_average"}) {
    tfm::Tensor host = out.at(name).toHost();
    const float *p = host.data<float>();
    result.insert(result.end(), p, p + (name[0] == 'a' ? 3 : 6));
  }
  return result;
}

} // namespace

// Three GPU sessions average their buckets through the communicator, on
// their streams: Σ_r w_r·x_r / Σ_r w_r, a rank of weight 0 adding nothing,
// and weights summing to 0 giving zeros, as on the CPU.
TEST(CudaDataParallel, SessionsAverageOnTheirStreams) {
  useStandIns();
  tfm::Context ctx;
  tfm::Module m(ctx, TFM_FAKE_EXCHANGE_MODEL);
  MemoryWorld world(3, /*deviceMemory=*/true);
  const float w[3] = {2, 0, 1};
  std::vector<std::vector<float>> got(3), zeros(3);
  onRanks(3, [&](int rank) {
    tfm::Session s(m);
    tfm_communicator_t c = world.communicator(rank);
    s.setCommunicator(&c);
    auto x = [&](float base, int n) {
      std::vector<float> v(n);
      for (int i = 0; i < n; ++i)
        v[i] = base + 10.0f * rank + i;
      return v;
    };
    got[rank] = average(s, x(1, 3), x(100, 6), w[rank]);
    zeros[rank] = average(s, x(1, 3), x(100, 6), 0);
  });
  std::vector<float> expected(9);
  for (int i = 0; i < 9; ++i) {
    float base = i < 3 ? 1.0f + i : 100.0f + (i - 3);
    // Ranks 0 and 2, weights 2 and 1: (2·base + (base + 20)) / 3.
    expected[i] = (2.0f * base + (base + 20.0f)) / 3.0f;
  }
  for (int rank = 0; rank < 3; ++rank) {
    for (int i = 0; i < 9; ++i)
      EXPECT_NEAR(got[rank][i], expected[i], 1e-4f * std::abs(expected[i]))
          << "rank " << rank << " element " << i;
    EXPECT_EQ(zeros[rank], std::vector<float>(9, 0.0f)) << "rank " << rank;
  }
  // A scaled sum per bucket and run, on the session's stream, with the
  // shares of the first run's weights.
  ASSERT_EQ(world.scaledSums.size(), 3u * 2 * 2);
  double shares[3] = {0, 0, 0};
  for (const auto &call : world.scaledSums) {
    EXPECT_NE(call.stream, nullptr);
    EXPECT_TRUE(call.count == 3 || call.count == 6) << call.count;
  }
  for (int i = 0; i < 6; ++i)
    shares[world.scaledSums[i].rank] = world.scaledSums[i].scale;
  EXPECT_NEAR(shares[0], 2.0 / 3.0, 1e-7);
  EXPECT_EQ(shares[1], 0.0);
  EXPECT_NEAR(shares[2], 1.0 / 3.0, 1e-7);
}

TEST(CudaDataParallel, AHostOnlyCommunicatorIsRefused) {
  useStandIns();
  tfm::Context ctx;
  tfm::Module m(ctx, TFM_FAKE_EXCHANGE_MODEL);
  tfm::Session s(m);
  MemoryWorld world(1);
  tfm_communicator_t c = world.communicator(0);
  std::string message = messageOf(tfm_session_set_communicator(s.get(), &c));
  EXPECT_NE(message.find("a GPU session needs one that takes device memory "
                         "(tfm_nccl_communicator)"),
            std::string::npos)
      << message;
}

// One rank through the communicator over NCCL: the average is the input,
// and the log shows a scaled sum per bucket on the stream, between the
// runtime's device copies.
TEST(CudaDataParallel, OneRankThroughNccl) {
  std::string log = ::testing::TempDir() + "nccl_session.log";
  useStandIns(log);
  placeRank(0, 1, 0);
  tfm_communicator_t c{};
  ASSERT_EQ(messageOf(tfm_nccl_communicator(0, nullptr, &c)), "");
  {
    tfm::Context ctx;
    tfm::Module m(ctx, TFM_FAKE_EXCHANGE_MODEL);
    tfm::Session s(m);
    s.setCommunicator(&c);
    std::vector<float> a = {1, 2, 3}, b = {4, 5, 6, 7, 8, 9};
    std::vector<float> got = average(s, a, b, 3);
    a.insert(a.end(), b.begin(), b.end());
    EXPECT_EQ(got, a);
  }
  tfm_nccl_communicator_destroy(&c);
  std::vector<std::string> lines = linesOf(log);
  EXPECT_TRUE(contains(lines, "nccl all_reduce 3 type 7 op 5 scale 1 on a "
                              "stream"));
  EXPECT_TRUE(contains(lines, "nccl all_reduce 6 type 7 op 5 scale 1 on a "
                              "stream"));
}
