//===- DataParallel.cpp - tfmc train as one rank of an MPI job
//-------------===//
//
// `mpirun -np N tfmc train ...` starts N processes; each joins the job
// through libtfm_mpi and hands its session the communicator. tfmc opens
// libtfm_mpi with dlopen, only when a launcher started it, so that tfmc
// itself (and the wheel that carries it) needs no MPI to run.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/mpi.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <initializer_list>

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

bool DataParallel::join() {
  int launched = launchedSize();
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

DataParallel::~DataParallel() {
  if (joined)
    mpi.finalize();
}
