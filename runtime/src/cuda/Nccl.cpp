//===- Nccl.cpp - Opening NCCL --------------------------------------------===//

#include "Nccl.h"

#include <fmt/format.h>

using namespace tfm::runtime::cuda;

namespace {

struct Loaded {
  Nccl nccl;
  std::string error;
  bool ok = false;
};

Loaded load() {
  Loaded l;
  Library library =
      openLibrary("TFM_NCCL_LIBRARY", {"libnccl.so.2"}, "NCCL", l.error);
  if (!library.handle) {
    l.error += "; NCCL comes with PyTorch's CUDA wheels (put their "
               "nvidia/nccl/lib on LD_LIBRARY_PATH) or NVIDIA's packages";
    return l;
  }
#define TFM_NCCL_RESOLVE(member, symbol, type)                                 \
  if (!resolve(library, symbol, l.nccl.member, "NCCL", l.error))               \
    return l;
  TFM_NCCL_FUNCTIONS(TFM_NCCL_RESOLVE)
#undef TFM_NCCL_RESOLVE
  l.nccl.getLastError = reinterpret_cast<const char *(*)(ncclComm)>(
      findSymbol(library, "ncclGetLastError"));
  int version = 0;
  if (l.nccl.getVersion(&version) != ncclSuccess) {
    l.error = "NCCL (" + library.path + ") does not say its version";
    return l;
  }
  // 2.9.x is 20900 and on; older releases counted 2.8.4 as 2804.
  l.nccl.version = version >= 10000
                       ? fmt::format("NCCL {}.{}.{}", version / 10000,
                                     version / 100 % 100, version % 100)
                       : fmt::format("NCCL {}.{}.{}", version / 1000,
                                     version / 100 % 10, version % 100);
  l.ok = true;
  return l;
}

} // namespace

const Nccl *tfm::runtime::cuda::nccl(std::string &error) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    error = loaded.error;
    return nullptr;
  }
  return &loaded.nccl;
}
