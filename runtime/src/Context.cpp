//===- Context.cpp - Process-wide settings and versions --------------------===//

#include "Internal.h"

#include <thread>

using namespace tfm::runtime;

extern "C" {

const char *tfm_runtime_version(void) { return TFM_VERSION_STRING; }

uint32_t tfm_runtime_version_number(void) { return TFM_VERSION; }

uint32_t tfm_runtime_model_abi_version(void) { return TFM_ABI_VERSION; }

void tfm_context_options_init(tfm_context_options_t *options) {
  if (!options)
    return;
  *options = tfm_context_options_t{};
  options->struct_size = sizeof(tfm_context_options_t);
}

tfm_status_t tfm_context_create(const tfm_context_options_t *options,
                                tfm_context_t **out_context) {
  if (!out_context)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_context_create: out_context is NULL");
  *out_context = nullptr;
  tfm_context_options_t opts;
  tfm_context_options_init(&opts);
  if (options) {
    if (options->struct_size < offsetof(tfm_context_options_t, num_threads) +
                                   sizeof(int32_t))
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "tfm_context_create: options->struct_size {} is too "
                        "small; call tfm_context_options_init",
                        options->struct_size);
    opts.num_threads = options->num_threads;
    if (options->struct_size >= offsetof(tfm_context_options_t, device) +
                                    sizeof(const char *))
      opts.device = options->device;
    if (options->struct_size >= offsetof(tfm_context_options_t, inspect_only) +
                                    sizeof(int32_t))
      opts.inspect_only = options->inspect_only;
  }
  if (opts.num_threads < 0)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_context_create: num_threads is negative ({})",
                      opts.num_threads);
  std::string device = opts.device ? opts.device : "";
  int32_t target;
  int ordinal;
  if (!device.empty() && !parseDeviceName(device, target, ordinal))
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_context_create: unknown device '{}'; devices are "
                      "'cpu', 'cuda' and 'cuda:N'",
                      device);
  return guarded("tfm_context_create", [&]() -> tfm_status_t {
    // A GPU named outright must be there: say so now rather than at the
    // first session.
    if (!device.empty() && target == TFM_TARGET_CUDA)
      makeDevice(device);
    auto *ctx = new tfm_context_s;
    ctx->device = device;
    ctx->inspectOnly = opts.inspect_only != 0;
    unsigned hw = std::thread::hardware_concurrency();
    ctx->numThreads =
        opts.num_threads ? opts.num_threads : static_cast<int32_t>(hw ? hw : 1);
    *out_context = ctx;
    return nullptr;
  });
}

void tfm_context_release(tfm_context_t *context) {
  if (context)
    context->release();
}

int32_t tfm_context_num_threads(const tfm_context_t *context) {
  return context ? context->numThreads : 0;
}

const char *tfm_context_device(const tfm_context_t *context) {
  return context ? context->device.c_str() : "";
}

int32_t tfm_context_inspect_only(const tfm_context_t *context) {
  return context && context->inspectOnly;
}

} // extern "C"
