//===- MemoryWorld.h - Ranks in threads, joined in memory --------*- C++
//-*-===//
//
// The runtime's tests stand for the processes of a data-parallel run with
// threads, each a session, joined by a communicator made here: every
// collective waits for each rank, then the last to arrive combines their
// buffers. No MPI, no NCCL.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TEST_UNITTESTS_RUNTIME_MEMORYWORLD_H
#define TFM_TEST_UNITTESTS_RUNTIME_MEMORYWORLD_H

#include "tfm/runtime.h"

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

/// The ranks' rendezvous: each collective waits for every rank, then the
/// last to arrive combines their buffers.
class MemoryWorld {
public:
  /// `deviceMemory`: the communicators say they take device memory, as a
  /// GPU session needs; the stand-in driver's device memory is host memory.
  explicit MemoryWorld(int size, bool deviceMemory = false)
      : size(size), deviceMemory(deviceMemory), buffers(size) {}

  /// Each all_reduce_scaled_sum: the rank, the count, its scale, its stream.
  struct ScaledSum {
    int rank;
    uint64_t count;
    double scale;
    void *stream;
  };
  std::vector<ScaledSum> scaledSums;

  tfm_communicator_t communicator(int rank) {
    tfm_communicator_t c{};
    c.struct_size = sizeof(c);
    c.rank = rank;
    c.size = size;
    c.user = &users.at(rank);
    users[rank] = {this, rank};
    c.all_reduce_sum = [](void *u, void *data, uint64_t count,
                          tfm_dtype_t dtype, void *, char *error,
                          size_t size) -> int32_t {
      if (dtype != TFM_DTYPE_F32) {
        std::snprintf(error, size, "f32 only");
        return 1;
      }
      auto *me = static_cast<User *>(u);
      me->self->meet(me->rank, data, [&](std::vector<void *> &all) {
        std::vector<float> sum(count, 0.0f);
        for (void *p : all)
          for (uint64_t i = 0; i < count; ++i)
            sum[i] += static_cast<float *>(p)[i];
        for (void *p : all)
          std::memcpy(p, sum.data(), count * sizeof(float));
      });
      return 0;
    };
    c.all_reduce_scaled_sum = [](void *u, void *data, uint64_t count,
                                 tfm_dtype_t dtype, double scale, void *stream,
                                 char *error, size_t size) -> int32_t {
      if (dtype != TFM_DTYPE_F32) {
        std::snprintf(error, size, "f32 only");
        return 1;
      }
      auto *me = static_cast<User *>(u);
      std::tuple<void *, double> mine{data, scale};
      me->self->meet(me->rank, &mine, [&](std::vector<void *> &all) {
        auto at = [&](void *p) {
          return *static_cast<std::tuple<void *, double> *>(p);
        };
        std::vector<float> sum(count, 0.0f);
        for (void *p : all)
          for (uint64_t i = 0; i < count; ++i)
            sum[i] += static_cast<float>(std::get<1>(at(p))) *
                      static_cast<float *>(std::get<0>(at(p)))[i];
        for (void *p : all)
          std::memcpy(std::get<0>(at(p)), sum.data(), count * sizeof(float));
      });
      std::lock_guard<std::mutex> lock(me->self->mutex);
      me->self->scaledSums.push_back({me->rank, count, scale, stream});
      return 0;
    };
    c.device_memory = deviceMemory;
    // The ranks that have made fewer collective calls than this one.
    c.lagging = [](void *u, char *ranks, size_t size) -> int32_t {
      auto *me = static_cast<User *>(u);
      std::lock_guard<std::mutex> lock(me->self->mutex);
      std::string list;
      for (int r = 0; r < me->self->size; ++r)
        if (me->self->calls[r] < me->self->calls[me->rank])
          list += (list.empty() ? "" : ", ") + std::to_string(r);
      std::snprintf(ranks, size, "%s", list.c_str());
      return 0;
    };
    c.broadcast = [](void *u, void *data, uint64_t bytes, int32_t root, void *,
                     char *, size_t) -> int32_t {
      auto *me = static_cast<User *>(u);
      me->self->meet(me->rank, data, [&](std::vector<void *> &all) {
        for (void *p : all)
          if (p != all[root])
            std::memcpy(p, all[root], bytes);
      });
      return 0;
    };
    c.all_gather = [](void *u, const void *send, void *receive, uint64_t bytes,
                      void *, char *, size_t) -> int32_t {
      auto *me = static_cast<User *>(u);
      std::pair<const void *, void *> mine{send, receive};
      me->self->meet(me->rank, &mine, [&](std::vector<void *> &all) {
        // memmove: in place, a rank's part is already where it goes.
        for (void *to : all)
          for (size_t r = 0; r < all.size(); ++r)
            std::memmove(
                static_cast<char *>(
                    static_cast<std::pair<const void *, void *> *>(to)
                        ->second) +
                    r * bytes,
                static_cast<std::pair<const void *, void *> *>(all[r])->first,
                bytes);
      });
      return 0;
    };
    c.reduce_scatter_sum = [](void *u, const void *send, void *receive,
                              uint64_t count, tfm_dtype_t dtype, void *,
                              char *error, size_t size) -> int32_t {
      if (dtype != TFM_DTYPE_F32) {
        std::snprintf(error, size, "f32 only");
        return 1;
      }
      auto *me = static_cast<User *>(u);
      std::pair<const void *, void *> mine{send, receive};
      me->self->meet(me->rank, &mine, [&](std::vector<void *> &all) {
        auto at = [&](size_t r) {
          return static_cast<std::pair<const void *, void *> *>(all[r]);
        };
        // Every sum first: a rank's result may overwrite its input.
        std::vector<std::vector<float>> sums(all.size(),
                                             std::vector<float>(count, 0.0f));
        for (size_t r = 0; r < all.size(); ++r)
          for (size_t from = 0; from < all.size(); ++from)
            for (uint64_t i = 0; i < count; ++i)
              sums[r][i] +=
                  static_cast<const float *>(at(from)->first)[r * count + i];
        for (size_t r = 0; r < all.size(); ++r)
          std::copy(sums[r].begin(), sums[r].end(),
                    static_cast<float *>(at(r)->second));
      });
      return 0;
    };
    return c;
  }

private:
  struct User {
    MemoryWorld *self;
    int rank;
  };

  void meet(int rank, void *data,
            const std::function<void(std::vector<void *> &)> &combine) {
    std::unique_lock<std::mutex> lock(mutex);
    ++calls[rank];
    uint64_t round = generation;
    buffers[rank] = data;
    if (++arrived == size) {
      combine(buffers);
      arrived = 0;
      ++generation;
      changed.notify_all();
      return;
    }
    changed.wait(lock, [&] { return generation != round; });
  }

  int size;
  bool deviceMemory;
  std::vector<void *> buffers;
  std::vector<uint64_t> calls = std::vector<uint64_t>(8);
  std::vector<User> users = std::vector<User>(8);
  std::mutex mutex;
  std::condition_variable changed;
  int arrived = 0;
  uint64_t generation = 0;
};

/// Runs `body(rank)` on one thread per rank and waits for all.
inline void onRanks(int size, const std::function<void(int)> &body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back(body, r);
  for (std::thread &t : threads)
    t.join();
}

#endif // TFM_TEST_UNITTESTS_RUNTIME_MEMORYWORLD_H
