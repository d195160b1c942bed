//===- DataParallel.cpp - tfmc train as one rank of an MPI job
//-------------===//
//
// `mpirun -np N tfmc train ...` starts N processes; each joins the job
// through libtfm_mpi and hands its session the communicator. tfmc opens
// libtfm_mpi with dlopen, only when a launcher started it, so that tfmc
// itself (and the wheel that carries it) needs no MPI to run. On GPUs the
// session gets a communicator over NCCL instead, its unique id shared over
// MPI, or, in a job started without MPI, at the TCP rendezvous that
// TFM_RANK, TFM_WORLD_SIZE and TFM_RENDEZVOUS describe.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/mpi.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <thread>

using namespace mlir::tfm::tfmc;

namespace {

/// The world size a launcher's environment gives, or 0 when none does.
int launchedSize() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *v = std::getenv(name))
      return std::atoi(v);
  return 0;
}

/// libtfm_mpi's functions, once opened.
tfm_mpi_library_t mpi;

} // namespace

/// A whole number in [low, high] from the environment variable `name`.
bool environmentInt(const char *name, long low, long high, long &value) {
  const char *v = std::getenv(name);
  char *end = nullptr;
  value = v ? std::strtol(v, &end, 10) : 0;
  return v && *v && *end == '\0' && value >= low && value <= high;
}

bool DataParallel::join() {
  int launched = launchedSize();
  if (launched <= 1 && std::getenv("TFM_WORLD_SIZE")) {
    // A GPU job started without MPI: the ranks meet where the environment
    // says when the communicator over NCCL is made (tfm_nccl_communicator).
    long n = 0, r = 0;
    if (!environmentInt("TFM_WORLD_SIZE", 1, 1 << 20, n) ||
        !environmentInt("TFM_RANK", 0, n - 1, r)) {
      error() << "TFM_WORLD_SIZE and TFM_RANK must give this process's rank "
                 "in a job of that many (TFM_WORLD_SIZE='"
              << std::getenv("TFM_WORLD_SIZE") << "', TFM_RANK='"
              << (std::getenv("TFM_RANK") ? std::getenv("TFM_RANK") : "")
              << "')\n";
      return false;
    }
    rank = static_cast<int32_t>(r);
    size = static_cast<int32_t>(n);
    byEnvironment = true;
    return true;
  }
  if (launched <= 1)
    return true;
#ifdef TFM_MPI_LIBRARY
  char message[512] = {0};
  if (tfm_mpi_open(TFM_MPI_LIBRARY, &mpi, message, sizeof(message))) {
    error() << "started as one of " << launched << " processes, but " << message
            << "; install Open MPI (openmpi-bin) to train across "
            << "processes\n";
    return false;
  }
  if (mpi.communicator(nullptr, nullptr, &communicator, message,
                       sizeof(message))) {
    error() << "cannot join the MPI job: " << message << "\n";
    return false;
  }
  joined = true;
  rank = communicator.rank;
  size = communicator.size;
  return true;
#else
  error() << "started as one of " << launched
          << " processes, but this tfmc was built without Open MPI, so it "
             "cannot train across processes (install libopenmpi-dev and "
             "openmpi-bin, then build again)\n";
  return false;
#endif
}

int DataParallel::abortJob(int code) {
  if (joined && size > 1) {
    llvm::outs().flush();
    llvm::errs().flush();
    mpi.abort(code);
  }
  return code;
}

int32_t DataParallel::threads(int32_t requested) const {
  if (requested != 0 || !distributed())
    return requested;
  long local = 0;
  bool known = false;
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if ((known = environmentInt(name, 1, 1 << 20, local)))
      break;
  unsigned hardware = std::thread::hardware_concurrency();
  if (!known || hardware == 0)
    return 0;
  return static_cast<int32_t>(std::max<long>(1, hardware / local));
}

std::string DataParallel::gpu(const std::string &device) const {
  if (!distributed() || (device != "cuda" && !device.empty()))
    return device;
  const char *local = nullptr;
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "TFM_LOCAL_RANK"})
    if (!local)
      local = std::getenv(name);
  // The default (the target the model was compiled for) stays the default
  // on a CPU model; `cuda` and a GPU model's default pick this rank's GPU.
  return device.empty() ? "" : "cuda:" + std::string(local ? local : "0");
}

bool DataParallel::joinOnDevice(tfm_session_t *session) {
  std::string device = tfm_session_device(session);
  if (device.rfind("cuda:", 0) != 0) {
    if (!byEnvironment)
      return true;
    error() << "TFM_WORLD_SIZE starts a job without MPI, whose ranks meet "
               "through NCCL, which runs on GPUs; the model runs on "
            << device << ": start CPU ranks with mpirun\n";
    return false;
  }
  tfm_status_t s = tfm_nccl_communicator(
      std::atoi(device.c_str() + 5), joined ? &communicator : nullptr, &nccl);
  if (s) {
    error() << tfm_status_message(s) << "\n";
    tfm_status_free(s);
    return false;
  }
  hasNccl = true;
  return true;
}

const tfm_communicator_t *DataParallel::sessionCommunicator() const {
  return hasNccl ? &nccl : &communicator;
}

DataParallel::~DataParallel() {
  if (hasNccl)
    tfm_nccl_communicator_destroy(&nccl);
  if (joined)
    mpi.finalize();
}
