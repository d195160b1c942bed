//===- Generate.cpp - The decoding loop over prefill and decode_step ------===//
//
// The model computes logits for new tokens and keeps the keys and values in
// the session state; this loop feeds it. The prompt goes through `prefill`
// in chunks (the last one right-padded, which is exact for a causal model:
// a padded position writes cache rows that the next step overwrites before
// any token attends to them), then every step feeds the last token of each
// live hypothesis to `decode_step` at the next position. A beam search
// reorders the caches by the rows the Search says each new hypothesis
// continues.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"
#include "Search.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

using namespace tfm::runtime;

struct tfm_generation_s {
  std::vector<Hypothesis> sequences;
  double promptMs = 0, decodeMs = 0;
  int64_t steps = 0;
};

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

struct TensorRef {
  tfm_tensor_t *t = nullptr;
  ~TensorRef() { tfm_tensor_release(t); }
};

/// The bytes of a 1 in a padding mask of `dtype` (an integer or a
/// boolean, as the compiler takes masks), or 0 for another type.
size_t maskOneBytes(int32_t dtype) {
  switch (dtype) {
  case TFM_DTYPE_I64:
  case TFM_DTYPE_U64:
    return 8;
  case TFM_DTYPE_I32:
  case TFM_DTYPE_U32:
    return 4;
  case TFM_DTYPE_I16:
  case TFM_DTYPE_U16:
    return 2;
  case TFM_DTYPE_I8:
  case TFM_DTYPE_U8:
  case TFM_DTYPE_BOOL:
    return 1;
  default:
    return 0;
  }
}

/// What the loop needs of a model compiled for generation.
struct GenerationModel {
  const tfm_abi_entry_t *prefill = nullptr, *step = nullptr;
  const tfm_abi_entry_t *encode = nullptr; // an encoder-decoder's
  int64_t maxLength = 0, batch = 0, chunk = 0, vocab = 0;
};

int64_t maxLengthOf(const tfm_abi_model_t *m) {
  if (m->struct_size < offsetof(tfm_abi_model_t, generation_max_length) +
                           sizeof(int64_t))
    return 0;
  return m->generation_max_length;
}

tfm_status_t describe(const tfm_module_s *module, GenerationModel &g) {
  g.maxLength = maxLengthOf(module->model);
  g.prefill = module->findEntry("prefill");
  g.step = module->findEntry("decode_step");
  g.encode = module->findEntry("encode");
  if (g.maxLength <= 0 || !g.prefill || !g.step)
    return makeStatus(TFM_STATUS_FAILED_PRECONDITION,
                      "'{}' was not compiled for generation; compile the "
                      "model with tfmc compile --generate",
                      module->path);
  // The compiler writes this layout (tfm/abi.h); check it rather than trust
  // it, since the entries' names are all that marks them.
  for (const tfm_abi_entry_t *e : {g.prefill, g.step}) {
    bool ok = e->num_inputs >= 2 && e->num_outputs >= 1 &&
              e->inputs[0].rank == 2 && e->inputs[0].dtype == TFM_DTYPE_I64 &&
              e->inputs[1].rank == 0 && e->inputs[1].dtype == TFM_DTYPE_I64 &&
              e->outputs[0].rank == 3 && e->outputs[0].dtype == TFM_DTYPE_F32 &&
              e->outputs[0].dims[0] == e->inputs[0].dims[0] &&
              e->outputs[0].dims[1] == e->inputs[0].dims[1];
    // Padding masks of the ids follow, over every position of the cache.
    for (int32_t i = 2; ok && i < e->num_inputs; ++i)
      ok = e->inputs[i].rank == 2 &&
           e->inputs[i].dims[0] == e->inputs[0].dims[0] &&
           e->inputs[i].dims[1] == g.maxLength &&
           maskOneBytes(e->inputs[i].dtype) > 0;
    if (!ok)
      return makeStatus(TFM_STATUS_DATA_LOSS,
                        "'{}': entry '{}' does not take token ids, a "
                        "position and padding masks to logits, as generation "
                        "entries do",
                        module->path, e->name);
  }
  if (g.encode &&
      (g.encode->num_inputs != 1 || g.encode->num_outputs != 0 ||
       g.encode->inputs[0].rank != 2 ||
       g.encode->inputs[0].dtype != TFM_DTYPE_I64 ||
       g.encode->inputs[0].dims[0] != g.step->inputs[0].dims[0]))
    return makeStatus(TFM_STATUS_DATA_LOSS,
                      "'{}': entry 'encode' does not take the source ids of "
                      "the generation's batch",
                      module->path);
  g.batch = g.step->inputs[0].dims[0];
  g.chunk = g.prefill->inputs[0].dims[1];
  g.vocab = g.step->outputs[0].dims[2];
  if (g.step->inputs[0].dims[1] != 1 ||
      g.prefill->inputs[0].dims[0] != g.batch ||
      g.prefill->outputs[0].dims[2] != g.vocab || g.batch < 1 ||
      g.vocab < 1)
    return makeStatus(TFM_STATUS_DATA_LOSS,
                      "'{}': the generation entries disagree on their shapes",
                      module->path);
  return nullptr;
}

class Loop {
public:
  Loop(tfm_session_t *session, const GenerationModel &g)
      : session(session), g(g) {}

  /// Runs `e` on `tokens` (one row's worth per live row; rows past them
  /// repeat row 0) at `position`; the logits land in `logits`.
  tfm_status_t run(const tfm_abi_entry_t *e,
                   const std::vector<std::vector<int64_t>> &tokens,
                   int64_t position, TensorRef &logits) {
    int64_t width = e->inputs[0].dims[1];
    TensorRef ids, pos;
    if (tfm_status_t s = tfm_tensor_create(TFM_DTYPE_I64, e->inputs[0].dims,
                                           2, &ids.t))
      return s;
    if (tfm_status_t s = tfm_tensor_create(TFM_DTYPE_I64, nullptr, 0, &pos.t))
      return s;
    auto *id = static_cast<int64_t *>(tfm_tensor_data(ids.t));
    for (int64_t r = 0; r < g.batch; ++r) {
      const std::vector<int64_t> &row =
          tokens[static_cast<size_t>(r) < tokens.size() ? r : 0];
      for (int64_t c = 0; c < width; ++c)
        id[r * width + c] = c < static_cast<int64_t>(row.size()) ? row[c] : 0;
    }
    *static_cast<int64_t *>(tfm_tensor_data(pos.t)) = position;
    // Every position is kept: the prompt is one row's, unpadded, and the
    // causal mask hides the positions not written yet.
    std::vector<TensorRef> masks(e->num_inputs - 2);
    std::vector<tfm_tensor_t *> in{ids.t, pos.t};
    for (int32_t i = 2; i < e->num_inputs; ++i) {
      TensorRef &m = masks[i - 2];
      if (tfm_status_t s =
              tfm_tensor_create(static_cast<tfm_dtype_t>(e->inputs[i].dtype),
                                e->inputs[i].dims, 2, &m.t))
        return s;
      void *data = tfm_tensor_data(m.t);
      size_t n =
          static_cast<size_t>(e->inputs[i].dims[0] * e->inputs[i].dims[1]);
      switch (maskOneBytes(e->inputs[i].dtype)) {
      case 8:
        std::fill_n(static_cast<int64_t *>(data), n, 1);
        break;
      case 4:
        std::fill_n(static_cast<int32_t *>(data), n, 1);
        break;
      case 2:
        std::fill_n(static_cast<int16_t *>(data), n, 1);
        break;
      default:
        std::fill_n(static_cast<uint8_t *>(data), n, 1);
        break;
      }
      in.push_back(m.t);
    }
    std::vector<tfm_tensor_t *> outs(e->num_outputs, nullptr);
    tfm_status_t s = runEntry(session, e, in.data(), in.size(), outs.data());
    if (s)
      return s;
    logits.t = outs[0];
    for (size_t i = 1; i < outs.size(); ++i)
      tfm_tensor_release(outs[i]);
    return nullptr;
  }

  /// Runs `encode` on the source, the same in every row.
  tfm_status_t encode(const int64_t *source, int64_t length) {
    TensorRef ids;
    if (tfm_status_t s = tfm_tensor_create(
            TFM_DTYPE_I64, g.encode->inputs[0].dims, 2, &ids.t))
      return s;
    auto *id = static_cast<int64_t *>(tfm_tensor_data(ids.t));
    for (int64_t r = 0; r < g.batch; ++r)
      std::copy(source, source + length, id + r * length);
    tfm_tensor_t *in[1] = {ids.t};
    return runEntry(session, g.encode, in, 1, nullptr);
  }

  /// Moves each cache's batch blocks: block i becomes old block rows[i].
  void reorder(const std::vector<int64_t> &rows) {
    bool identity = true;
    for (size_t i = 0; i < rows.size(); ++i)
      identity &= rows[i] == static_cast<int64_t>(i);
    if (identity)
      return;
    const tfm_abi_model_t *m = session->module->model;
    Device &device = *session->device;
    auto *state = static_cast<char *>(session->state.get());
    for (int32_t i = 0; i < m->num_states; ++i) {
      const tfm_abi_state_desc_t &st = m->states[i];
      if (st.kind != TFM_STATE_CACHE)
        continue;
      size_t bytes = tensorBytes(st.tensor), block = bytes / g.batch;
      old.resize(bytes);
      device.copyToHost(old.data(), state + st.offset, bytes);
      for (size_t r = 0; r < rows.size(); ++r)
        if (rows[r] != static_cast<int64_t>(r))
          device.copyToDevice(state + st.offset + r * block,
                              old.data() + rows[r] * block, block);
    }
  }

private:
  tfm_session_t *session;
  const GenerationModel &g;
  std::vector<char> old;
};

tfm_status_t badOption(const char *what) {
  return makeStatus(TFM_STATUS_INVALID_ARGUMENT, "tfm_session_generate: {}",
                    what);
}

} // namespace

extern "C" {

void tfm_generate_options_init(tfm_generate_options_t *options) {
  if (!options)
    return;
  *options = tfm_generate_options_t{};
  options->struct_size = sizeof(tfm_generate_options_t);
  options->max_new_tokens = 16;
  options->beam_width = 1;
  options->end_token = -1;
  options->early_stopping = 1;
  options->temperature = 1.0;
  options->top_p = 1.0;
}

size_t tfm_generation_num_sequences(const tfm_generation_t *g) {
  return g ? g->sequences.size() : 0;
}

const int64_t *tfm_generation_tokens(const tfm_generation_t *g, size_t index,
                                     size_t *out_length) {
  if (out_length)
    *out_length = 0;
  if (!g || index >= g->sequences.size())
    return nullptr;
  const std::vector<int64_t> &t = g->sequences[index].tokens;
  if (out_length)
    *out_length = t.size();
  return t.data();
}

double tfm_generation_score(const tfm_generation_t *g, size_t index) {
  return g && index < g->sequences.size() ? g->sequences[index].score : 0.0;
}

double tfm_generation_prompt_ms(const tfm_generation_t *g) {
  return g ? g->promptMs : 0.0;
}
double tfm_generation_decode_ms(const tfm_generation_t *g) {
  return g ? g->decodeMs : 0.0;
}
int64_t tfm_generation_steps(const tfm_generation_t *g) {
  return g ? g->steps : 0;
}

void tfm_generation_release(tfm_generation_t *g) { delete g; }

int64_t tfm_module_generation_max_length(const tfm_module_t *module) {
  if (!module || !module->model)
    return 0;
  return maxLengthOf(module->model);
}

tfm_status_t tfm_session_generate(tfm_session_t *session,
                                  const int64_t *prompt, size_t prompt_length,
                                  const tfm_generate_options_t *options,
                                  tfm_generation_t **out_generation) {
  if (!session || !out_generation || (prompt_length && !prompt))
    return badOption("NULL argument");
  *out_generation = nullptr;
  tfm_generate_options_t o;
  tfm_generate_options_init(&o);
  if (options) {
    if (options->struct_size < sizeof(tfm_generate_options_t))
      return badOption("options->struct_size is too small; initialize the "
                       "options with tfm_generate_options_init");
    o = *options;
  }
  GenerationModel g;
  if (tfm_status_t s = describe(session->module, g))
    return s;
  auto promptLength = static_cast<int64_t>(prompt_length);
  if (promptLength < 1)
    return badOption("the prompt needs at least one token");
  for (size_t i = 0; i < prompt_length; ++i)
    if (prompt[i] < 0 || prompt[i] >= g.vocab)
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "tfm_session_generate: prompt token {} is {}, "
                        "outside the vocabulary [0, {})",
                        i, prompt[i], g.vocab);
  if (o.max_new_tokens < 1)
    return badOption("max_new_tokens must be at least 1");
  // The last new token is never fed back, so it needs no cache row.
  if (promptLength + o.max_new_tokens - 1 > g.maxLength)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_generate: a prompt of {} tokens and {} "
                      "new ones exceed the {} positions '{}' was compiled "
                      "for (--max-length)",
                      promptLength, o.max_new_tokens, g.maxLength,
                      session->module->path);
  if (o.beam_width < 1 || o.beam_width > g.batch)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_generate: beam width {} is not in [1, {}]: "
                      "the beams are the rows of the batch '{}' was compiled "
                      "with",
                      o.beam_width, g.batch, session->module->path);
  if (o.sample && (!(o.temperature > 0) || o.top_k < 0 ||
                   !(o.top_p > 0 && o.top_p <= 1)))
    return badOption("sampling needs temperature > 0, top_k >= 0 and top_p "
                     "in (0, 1]");
  if (o.end_token >= g.vocab)
    return badOption("end_token lies outside the vocabulary");
  int64_t sourceLength = g.encode ? g.encode->inputs[0].dims[1] : 0;
  if (g.encode && (!o.source ||
                   static_cast<int64_t>(o.source_length) != sourceLength))
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_generate: '{}' is an encoder-decoder "
                      "compiled for sources of {} tokens; the source given "
                      "has {}",
                      session->module->path, sourceLength,
                      o.source ? o.source_length : 0);
  if (!g.encode && o.source)
    return badOption("the model has no encoder to read a source");

  SearchOptions so;
  so.beamWidth = o.beam_width;
  so.lengthPenalty = o.length_penalty;
  so.endToken = o.end_token;
  so.earlyStopping = o.early_stopping != 0;
  so.sample = o.sample != 0;
  so.temperature = o.temperature;
  so.topK = o.top_k;
  so.topP = o.top_p;
  so.seed = o.seed;
  so.maxNewTokens = o.max_new_tokens;

  SessionUse use(session);
  if (!use.acquired())
    return sessionInUse("tfm_session_generate");
  return guarded("tfm_session_generate", [&]() -> tfm_status_t {
    auto result = std::make_unique<tfm_generation_s>();
    Loop loop(session, g);
    Search search(so, g.vocab);
    std::vector<float> rows;
    // The source once, then the prompt: chunks through prefill while a
    // whole chunk fits in the cache, the rest one token at a time.
    auto start = Clock::now();
    if (g.encode)
      if (tfm_status_t s = loop.encode(o.source, sourceLength))
        return s;
    TensorRef logits;
    int64_t last = 0; // the row of the logits that predicts the next token
    for (int64_t pos = 0; pos < promptLength;) {
      int64_t n = std::min(g.chunk, promptLength - pos);
      bool chunked = n > 1 && pos + g.chunk <= g.maxLength;
      if (!chunked)
        n = 1;
      std::vector<std::vector<int64_t>> tokens{
          std::vector<int64_t>(prompt + pos, prompt + pos + n)};
      tfm_tensor_release(logits.t);
      logits.t = nullptr;
      if (tfm_status_t s =
              loop.run(chunked ? g.prefill : g.step, tokens, pos, logits))
        return s;
      last = n - 1;
      pos += n;
    }
    result->promptMs = msSince(start);

    start = Clock::now();
    int64_t position = promptLength;
    int64_t width = tfm_tensor_dims(logits.t)[1];
    while (true) {
      const float *all = static_cast<const float *>(tfm_tensor_data(logits.t));
      rows.resize(search.live() * g.vocab);
      for (size_t r = 0; r < search.live(); ++r)
        std::memcpy(rows.data() + r * g.vocab,
                    all + (r * width + last) * g.vocab,
                    g.vocab * sizeof(float));
      std::vector<int64_t> parents = search.advance(rows.data());
      result->steps++;
      std::vector<int64_t> next = search.lastTokens();
      bool stop = o.on_token && !next.empty() &&
                  o.on_token(o.user_data, result->steps - 1, next.data(),
                             next.size()) != 0;
      if (stop)
        search.stop();
      if (search.done())
        break;
      loop.reorder(parents);
      std::vector<std::vector<int64_t>> tokens;
      for (int64_t t : next)
        tokens.push_back({t});
      tfm_tensor_release(logits.t);
      logits.t = nullptr;
      if (tfm_status_t s = loop.run(g.step, tokens, position, logits))
        return s;
      width = 1;
      last = 0;
      ++position;
    }
    result->decodeMs = msSince(start);
    result->sequences = search.results();
    *out_generation = result.release();
    return nullptr;
  });
}

} // extern "C"
