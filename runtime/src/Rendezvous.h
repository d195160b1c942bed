//===- Rendezvous.h - Ranks that meet over TCP, without MPI ------*- C++
//-*-===//
//
// A GPU job started without MPI (one process per GPU, by a scheduler or by
// hand) still has to agree on one thing before NCCL can connect its ranks:
// the unique id rank 0 draws. The environment says where to meet:
//   TFM_RANK         this process's rank, 0 .. TFM_WORLD_SIZE - 1
//   TFM_WORLD_SIZE   how many processes the job has
//   TFM_RENDEZVOUS   host:port, where rank 0 listens
// Rank 0 accepts one connection from every other rank, checks that each
// names a distinct rank of the same world size, and sends every rank its
// bytes. The collectives are NCCL's; what else travels here after the
// meeting is a RankWatch's heartbeat.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_RENDEZVOUS_H
#define TFM_RUNTIME_SRC_RENDEZVOUS_H

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tfm::runtime {

struct RendezvousPlace {
  int32_t rank = 0, size = 1;
  std::string host, port;
};

/// The place the environment describes; false, with `error` naming the
/// variable at fault, when one is missing or malformed.
bool rendezvousFromEnvironment(RendezvousPlace &place, std::string &error);

/// The rendezvous's connections, kept open for the job's life, so that a
/// rank waiting on a collective that does not finish can tell why. NCCL's
/// collectives never time out, and a GPU spinning on a peer that is gone
/// says nothing; this heartbeat does. Twice a second each rank tells rank
/// 0 how many collectives it has started, and rank 0 tells every rank what
/// it heard of all: their counts, which are silent, which have ended. A
/// connection that closes without the goodbye a RankWatch sends when it
/// is destroyed is a process that died.
class RankWatch {
public:
  /// Watches over `sockets`: on rank 0 one per rank (its own -1), on any
  /// other the one to rank 0. Takes them over.
  RankWatch(int32_t rank, int32_t size, std::vector<int> sockets);
  ~RankWatch();
  RankWatch(const RankWatch &) = delete;
  RankWatch &operator=(const RankWatch &) = delete;

  /// Counts a collective this rank starts.
  void started() { ++mine; }
  /// The ranks that ended without a goodbye, as "1, 3"; empty while none
  /// has.
  std::string ended();
  /// Every rank that is not keeping up with this one, with why: "1 (its
  /// process ended), 2 (silent for 4 s), 3 (behind: 10 collectives started
  /// to this rank's 12)", or without `reasons` "1, 2, 3"; empty when none
  /// is known to lag.
  std::string lagging(bool reasons = true);

private:
  struct Peer {
    int fd = -1;
    /// Bytes received and not yet a whole message; bytes not yet sent.
    std::string inbox, outbox;
  };
  struct Heard {
    uint64_t count = 0;
    std::chrono::steady_clock::time_point at;
    bool ended = false, left = false, silent = false;
  };
  void serve();
  void send(Peer &peer, const void *data, size_t bytes);
  void receive(size_t p, std::chrono::steady_clock::time_point now);
  void closePeer(size_t p, bool died);

  int32_t rank, size;
  std::atomic<uint64_t> mine{0};
  std::atomic<bool> stopping{false};
  /// Rank 0: indexed by rank. Others: one, rank 0.
  std::vector<Peer> peers;
  std::mutex mutex;
  /// What this rank knows of every rank, under `mutex`.
  std::vector<Heard> heard;
  std::thread thread;
};

/// Meets the other ranks at `place`: rank 0 sends `bytes` to every rank,
/// and the others receive them into `bytes` (resized). Gives up after
/// `timeoutSeconds`, naming the ranks that did not arrive (on rank 0) or
/// the address that did not answer. False, with `error`, on failure. With
/// `watch`, the connections stay open as a RankWatch there (null in a
/// world of one). Rank 0 listens on `listening` where given (it takes it
/// over), else on place.port.
bool rendezvous(const RendezvousPlace &place, std::vector<char> &bytes,
                double timeoutSeconds, std::string &error,
                std::unique_ptr<RankWatch> *watch = nullptr,
                int listening = -1);

/// For ranks that already share a channel (a bootstrap communicator), whose
/// meeting here only sets up a RankWatch: rank 0 listens on a port the
/// system picks, writing this machine's name and the port to `place`,
/// which then travels to the other ranks over the channel before every
/// rank calls rendezvous (rank 0 with the socket returned here). -1, with
/// `error`, when it cannot listen.
int listenForRendezvous(RendezvousPlace &place, std::string &error);

/// TFM_COLLECTIVE_TIMEOUT in seconds where it is set and positive, else
/// `fallback`: one timeout for every wait on other ranks.
double collectiveTimeout(double fallback = 300);

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_RENDEZVOUS_H
