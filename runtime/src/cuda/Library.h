//===- Library.h - Opening an NVIDIA library with dlopen ---------*- C++ -*-===//
//
// The runtime needs nothing CUDA to build: the driver and cuBLASLt are
// opened when a session first asks for them, and their functions found by
// name into tables of hand-declared types (Driver.h, Blas.h): X-macros of
// (member, symbol, type), each resolved with `resolve`.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CUDA_LIBRARY_H
#define TFM_RUNTIME_SRC_CUDA_LIBRARY_H

#include <initializer_list>
#include <string>

namespace tfm::runtime::cuda {

/// Spells a function pointer type where a declarator cannot.
template <typename T> using Function = T;

/// A library opened for the rest of the process: its handle and the name
/// it was found under.
struct Library {
  void *handle = nullptr;
  std::string path;
};

/// Opens the library that environment variable `override` names, else the
/// first of `names` the dynamic loader finds (its search path, which covers
/// LD_LIBRARY_PATH and a library an embedder already loaded). On failure,
/// `error` says what was tried and why it failed, prefixed by `what`.
Library openLibrary(const char *override,
                    std::initializer_list<const char *> names,
                    const std::string &what, std::string &error);

/// Sets `member` to `symbol` of `library`; false, with `error` naming
/// the function and the library, when it has none.
void *findSymbol(const Library &library, const char *symbol);
template <typename T>
bool resolve(const Library &library, const char *symbol, T &member,
             const std::string &what, std::string &error) {
  member = reinterpret_cast<T>(findSymbol(library, symbol));
  if (!member)
    error = what + " (" + library.path + ") has no function " + symbol +
            "; it is too old";
  return member != nullptr;
}

} // namespace tfm::runtime::cuda

#endif // TFM_RUNTIME_SRC_CUDA_LIBRARY_H
