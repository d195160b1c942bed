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
// bytes. Nothing else travels here: the collectives are NCCL's.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_RENDEZVOUS_H
#define TFM_RUNTIME_SRC_RENDEZVOUS_H

#include <cstdint>
#include <string>
#include <vector>

namespace tfm::runtime {

struct RendezvousPlace {
  int32_t rank = 0, size = 1;
  std::string host, port;
};

/// The place the environment describes; false, with `error` naming the
/// variable at fault, when one is missing or malformed.
bool rendezvousFromEnvironment(RendezvousPlace &place, std::string &error);

/// Meets the other ranks at `place`: rank 0 sends `bytes` to every rank,
/// and the others receive them into `bytes` (resized). Gives up after
/// `timeoutSeconds`, naming the ranks that did not arrive (on rank 0) or
/// the address that did not answer. False, with `error`, on failure.
bool rendezvous(const RendezvousPlace &place, std::vector<char> &bytes,
                double timeoutSeconds, std::string &error);

/// TFM_COLLECTIVE_TIMEOUT in seconds where it is set and positive, else
/// `fallback`: one timeout for every wait on other ranks.
double collectiveTimeout(double fallback = 300);

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_RENDEZVOUS_H
