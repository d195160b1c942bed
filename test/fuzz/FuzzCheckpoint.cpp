//===- FuzzCheckpoint.cpp - The checkpoint loader on any bytes -------------===//
//
// A session of the tiny training model loads any bytes as a checkpoint: a
// bad file must be refused whole, leaving the session as it was.
//
//===----------------------------------------------------------------------===//

#include "tfm/runtime.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace {

tfm_session_t *session() {
  static tfm_session_t *s = [] {
    tfm_context_t *context = nullptr;
    tfm_module_t *module = nullptr;
    tfm_session_t *created = nullptr;
    const char *path = std::getenv("TFM_FUZZ_MODEL");
    if (tfm_context_create(nullptr, &context) ||
        tfm_module_load(context, path ? path : TFM_TINY_TRAIN_SO, &module) ||
        tfm_session_create(module, nullptr, &created)) {
      std::fprintf(stderr, "fuzz-checkpoint: cannot load the model\n");
      std::abort();
    }
    return created;
  }();
  return s;
}

/// The checkpoint format's trailing checksum (runtime/src/State.cpp):
/// 64-bit FNV-1a of everything before it.
uint64_t fnv1a(const uint8_t *data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

void load(const uint8_t *data, size_t size, const uint64_t *checksum) {
  static const std::string path =
      "/tmp/tfm-fuzz-checkpoint-" + std::to_string(getpid());
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort();
  std::fwrite(data, 1, size, f);
  if (checksum)
    std::fwrite(checksum, sizeof(*checksum), 1, f);
  std::fclose(f);
  tfm_status_free(tfm_session_load_checkpoint(session(), path.c_str()));
  std::remove(path.c_str());
}

} // namespace

// The bytes as they are, and again with a valid checksum appended, so
// that mutations reach the parser behind the checksum.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load(data, size, nullptr);
  uint64_t sum = fnv1a(data, size);
  load(data, size, &sum);
  return 0;
}
