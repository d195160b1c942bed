//===- Blas.cpp - Opening cuBLASLt ----------------------------------------===//

#include "Blas.h"

#include "../Device.h"

using namespace tfm::runtime::cuda;

std::string Blas::describe(cublasStatus_t rc) const {
  const char *name = getStatusName(rc);
  if (!name)
    return "cuBLAS status " + std::to_string(rc);
  std::string out = name;
  if (const char *text = getStatusString(rc); text && *text)
    out += std::string(" (") + text + ")";
  return out;
}

namespace {

struct Loaded {
  Blas blas;
  std::string error;
  bool ok = false;
};

Loaded load() {
  Loaded l;
  if (tfm::runtime::libraryKernelsOff()) {
    l.error = "cuBLASLt is turned off (TFM_CUBLASLT=off)";
    return l;
  }
  // The sonames of CUDA 13, 12 and 11: a toolkit's, or the NVIDIA wheels'
  // when the loader's path or an embedder (a framework) has them.
  Library library = openLibrary(
      "TFM_CUBLASLT",
      {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"},
      "cuBLASLt", l.error);
  if (!library.handle)
    return l;
#define TFM_CUBLASLT_RESOLVE(member, symbol, type)                             \
  if (!resolve(library, symbol, l.blas.member, "cuBLASLt", l.error))           \
    return l;
  TFM_CUBLASLT_FUNCTIONS(TFM_CUBLASLT_RESOLVE)
#undef TFM_CUBLASLT_RESOLVE
  l.blas.path = library.path;
  // 130002 is 13.0.2 (major·10000 + minor·100 + patch).
  size_t v = l.blas.getVersion();
  l.blas.version = std::to_string(v / 10000) + "." +
                   std::to_string(v / 100 % 100) + "." +
                   std::to_string(v % 100);
  l.ok = true;
  return l;
}

} // namespace

const Blas *tfm::runtime::cuda::blas(std::string &error) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    error = loaded.error;
    return nullptr;
  }
  return &loaded.blas;
}
