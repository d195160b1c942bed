//===- Library.cpp - Opening an NVIDIA library with dlopen ----------------===//

#include "Library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>
#include <vector>

using namespace tfm::runtime::cuda;

Library
tfm::runtime::cuda::openLibrary(const char *override,
                                std::initializer_list<const char *> names,
                                const std::string &what, std::string &error) {
  const char *chosen = std::getenv(override);
  // Each path tried and why it did not load.
  std::vector<std::pair<std::string, std::string>> failures;
  auto attempt = [&](const std::string &path) -> Library {
    // Libraries stay loaded for the process: contexts, handles and modules
    // outlive any one session, and unloading them under those is not
    // supported.
    if (void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))
      return {handle, path};
    const char *why = dlerror();
    failures.emplace_back(path, why ? why : "unknown error");
    return {};
  };
  if (chosen && *chosen) {
    if (Library l = attempt(chosen); l.handle)
      return l;
  } else {
    for (const char *name : names)
      if (Library l = attempt(name); l.handle)
        return l;
  }
  if (failures.size() == 1) {
    error = what + " (" + failures[0].first +
            ") cannot be loaded: " + failures[0].second;
  } else {
    error = what + " cannot be loaded:";
    for (auto &[path, why] : failures)
      error += (&path == &failures[0].first ? " " : "; ") + why;
  }
  return {};
}

void *tfm::runtime::cuda::findSymbol(const Library &library,
                                     const char *symbol) {
  return library.handle ? dlsym(library.handle, symbol) : nullptr;
}
