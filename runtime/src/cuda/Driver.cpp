//===- Driver.cpp - Opening the CUDA driver -------------------------------===//

#include "Driver.h"

#include <dlfcn.h>

#include <cstdlib>

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
  const char *override = std::getenv("TFM_CUDA_DRIVER");
  std::string path = override && *override ? override : "libcuda.so.1";
  // The driver stays loaded for the process: contexts and modules outlive
  // any one session, and unloading it under them is not supported.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    l.error = "the CUDA driver (" + path + ") cannot be loaded: " +
              (why ? why : "unknown error") +
              "; is an NVIDIA driver installed?";
    return l;
  }
#define TFM_CUDA_RESOLVE(member, symbol, type)                                 \
  l.driver.member = reinterpret_cast<type>(dlsym(handle, symbol));             \
  if (!l.driver.member) {                                                      \
    l.error = "the CUDA driver (" + path + ") has no function " symbol         \
              "; it is too old";                                               \
    return l;                                                                  \
  }
  TFM_CUDA_DRIVER_FUNCTIONS(TFM_CUDA_RESOLVE)
#undef TFM_CUDA_RESOLVE
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
