//===- Generate.cpp - tfmc generate ---------------------------------------===//
//
// Drives tfm_session_generate on a library compiled with --generate: the
// new tokens of each sequence on a line of standard output (streamed as
// they come when there is one hypothesis), the timing on standard error.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir::tfm::tfmc;

namespace {

/// Prints each token as it comes; `printed` (a bool) records that a line
/// was begun, which an error must end, and which no line was begun must not
/// leave empty on stdout.
int32_t streamToken(void *printed, int64_t step, const int64_t *tokens,
                    size_t) {
  llvm::outs() << (step ? "," : "") << tokens[0];
  llvm::outs().flush();
  *static_cast<bool *>(printed) = true;
  return 0;
}

} // namespace

int mlir::tfm::tfmc::generateCompiled(llvm::StringRef soPath,
                                      const GenerateOptions &opts) {
  tfm_context_options_t co;
  tfm_context_options_init(&co);
  co.num_threads = opts.threads;
  co.device = opts.device.c_str();
  tfm_context_t *context = nullptr;
  tfm_module_t *module = nullptr;
  tfm_session_t *session = nullptr;
  tfm_generation_t *generation = nullptr;
  auto release = [&] {
    tfm_generation_release(generation);
    tfm_session_release(session);
    tfm_module_release(module);
    tfm_context_release(context);
  };
  if (!ok(tfm_context_create(&co, &context)) ||
      !ok(tfm_module_load(context, soPath.str().c_str(), &module)) ||
      !ok(tfm_session_create(module, nullptr, &session))) {
    release();
    return kExitInputError;
  }
  tfm_generate_options_t go;
  tfm_generate_options_init(&go);
  go.max_new_tokens = opts.maxNewTokens;
  go.beam_width = opts.beam;
  go.length_penalty = opts.lengthPenalty;
  go.end_token = opts.endToken;
  go.sample = opts.sample;
  go.temperature = opts.temperature;
  go.top_k = opts.topK;
  go.top_p = opts.topP;
  go.seed = opts.seed;
  if (!opts.source.empty()) {
    go.source = opts.source.data();
    go.source_length = opts.source.size();
  }
  bool streaming = opts.beam == 1, printed = false;
  if (streaming) {
    go.on_token = streamToken;
    go.user_data = &printed;
  }
  if (!ok(tfm_session_generate(session, opts.prompt.data(), opts.prompt.size(),
                               &go, &generation))) {
    if (printed)
      llvm::outs() << "\n";
    release();
    return kExitInputError;
  }
  size_t n = tfm_generation_num_sequences(generation);
  for (size_t i = streaming ? 1 : 0; i < n; ++i) {
    size_t length = 0;
    const int64_t *t = tfm_generation_tokens(generation, i, &length);
    for (size_t j = 0; j < length; ++j)
      llvm::outs() << (j ? "," : "") << t[j];
    llvm::outs() << "\n";
  }
  if (streaming)
    llvm::outs() << "\n";
  int64_t steps = tfm_generation_steps(generation);
  double decode = tfm_generation_decode_ms(generation);
  if (opts.bench) {
    // The same generation again in the same session (its first run packed
    // the weights): the medians of its prompt time and time per token.
    go.on_token = nullptr;
    std::vector<double> prompts, perToken;
    for (unsigned i = 0; i < opts.bench; ++i) {
      tfm_generation_release(generation);
      generation = nullptr;
      if (!ok(tfm_session_generate(session, opts.prompt.data(),
                                   opts.prompt.size(), &go, &generation))) {
        release();
        return kExitInputError;
      }
      prompts.push_back(tfm_generation_prompt_ms(generation));
      perToken.push_back(tfm_generation_decode_ms(generation) /
                         std::max<int64_t>(1, tfm_generation_steps(generation)));
    }
    auto median = [](std::vector<double> v) {
      llvm::sort(v);
      return v[v.size() / 2];
    };
    llvm::errs() << llvm::format(
        "bench: %u generations, prompt median %.3f ms, per token median %.4f "
        "ms\n",
        opts.bench, median(prompts), median(perToken));
  }
  llvm::errs() << llvm::format(
      "prompt: %zu tokens in %.3f ms; decoding: %lld steps in %.3f ms, "
      "%.3f ms per token (threads %d)\n",
      opts.prompt.size(), tfm_generation_prompt_ms(generation),
      static_cast<long long>(steps), decode,
      steps ? decode / steps : 0.0, tfm_context_num_threads(context));
  release();
  return kExitOk;
}
