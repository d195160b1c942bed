//===- Driver.cpp - Opening the CUDA driver -------------------------------===//

#include "Driver.h"
#include "Library.h"

#include <utility>

using namespace tfm::runtime::cuda;

std::string Driver::describe(CUresult rc) const {
  const char *name = nullptr, *text = nullptr;
  if (getErrorName(rc, &name) != CUDA_SUCCESS || !name)
    return "CUDA error " + std::to_string(rc);
  std::string out = name;
  if (getErrorString(rc, &text) == CUDA_SUCCESS && text)
    out += std::string(" (") + text + ")";
  return out;
}

namespace {

struct Loaded {
  Driver driver;
  std::string error;
  bool ok = false;
};

Loaded load() {
  Loaded l;
  Library library = openLibrary("TFM_CUDA_DRIVER", {"libcuda.so.1"},
                                "the CUDA driver", l.error);
  if (!library.handle) {
    l.error += "; is an NVIDIA driver installed?";
    return l;
  }
#define TFM_CUDA_RESOLVE(member, symbol, type)                                 \
  if (!resolve(library, symbol, l.driver.member, "the CUDA driver", l.error))  \
    return l;
  TFM_CUDA_DRIVER_FUNCTIONS(TFM_CUDA_RESOLVE)
#undef TFM_CUDA_RESOLVE
  // The optional groups: each is there when all its functions are.
  bool has = true;
#define TFM_CUDA_RESOLVE_OPTIONAL(member, symbol, type)                        \
  l.driver.member = reinterpret_cast<type>(findSymbol(library, symbol));       \
  has = has && l.driver.member;
  TFM_CUDA_GRAPH_FUNCTIONS(TFM_CUDA_RESOLVE_OPTIONAL)
  l.driver.hasGraphs = std::exchange(has, true);
  TFM_CUDA_TENSOR_MAP_FUNCTIONS(TFM_CUDA_RESOLVE_OPTIONAL)
  l.driver.hasTensorMaps = has;
#undef TFM_CUDA_RESOLVE_OPTIONAL
  if (CUresult rc = l.driver.init(0); rc != CUDA_SUCCESS) {
    l.error = "the CUDA driver does not initialize: " + l.driver.describe(rc);
    return l;
  }
  l.ok = true;
  return l;
}

} // namespace

const Driver *tfm::runtime::cuda::driver(std::string &error) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    error = loaded.error;
    return nullptr;
  }
  return &loaded.driver;
}
