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

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path =
      "/tmp/tfm-fuzz-checkpoint-" + std::to_string(getpid());
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort();
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  tfm_status_free(tfm_session_load_checkpoint(session(), path.c_str()));
  std::remove(path.c_str());
  return 0;
}
