//===- gpt.cpp - Train a small GPT on a text file -------------------------===//
//
//   tfm-gpt GPT.so CORPUS.txt [--steps N] [--checkpoint FILE]
//
// Trains the character-level decoder of gpt.onnx, compiled with
// `tfmc compile --train`, on CORPUS less every tenth block of 256
// characters, which is held out: each step reads 32 random windows of 64
// characters (none crossing into a held-out block) and learns every next
// character. Every 100 steps it reports the training loss and the loss on
// the held-out blocks, computed from the inference entry's logits (no
// training there).
// At the end it saves a checkpoint and continues a prompt through the
// inference entry with the trained weights, and, when the library was also
// compiled with --generate, through the KV-cache entries (the same
// session's trained parameters). The vocabulary is the sorted
// set of the corpus's characters, as make_models.py built the model with.
// Exits 1 if the best held-out loss is not at least one nat below the
// untrained model's.
//
//===----------------------------------------------------------------------===//
#include "Common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

namespace {

constexpr int64_t kBatch = 32, kLen = 64;

constexpr size_t kBlock = 256;

struct Corpus {
  std::string chars; // the vocabulary, sorted
  std::vector<int64_t> train, heldOut;
  std::vector<int64_t> trainStarts; // where a training window may begin
  int64_t index(char c) const {
    return std::lower_bound(chars.begin(), chars.end(), c) - chars.begin();
  }
};

Corpus readCorpus(const char *path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(std::string("cannot read '") + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  Corpus c;
  c.chars = text;
  std::sort(c.chars.begin(), c.chars.end());
  c.chars.erase(std::unique(c.chars.begin(), c.chars.end()), c.chars.end());
  for (size_t at = 0; at < text.size(); at += kBlock) {
    bool held = (at / kBlock) % 10 == 9;
    std::vector<int64_t> &to = held ? c.heldOut : c.train;
    size_t first = to.size(), end = std::min(text.size(), at + kBlock);
    for (size_t i = at; i < end; ++i)
      to.push_back(c.index(text[i]));
    if (!held)
      for (size_t s = first; s + kLen + 1 <= to.size(); ++s)
        c.trainStarts.push_back(int64_t(s));
  }
  if (int64_t(c.heldOut.size()) <= kLen || c.trainStarts.empty())
    throw std::runtime_error("the corpus is too short: it needs at least ten blocks of " +
                             std::to_string(kBlock) + " characters");
  return c;
}

/// Mean cross-entropy of the model's logits at every position of `ids`
/// against the next characters.
double heldOutLoss(tfm::Session &session, const std::string &entry, const Corpus &c,
                   int64_t vocab) {
  tfm::Tensor ids(TFM_DTYPE_I64, {kBatch, kLen});
  double sum = 0;
  int64_t count = 0;
  int64_t windows = int64_t(c.heldOut.size()) - kLen - 1;
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t i = 0; i < kLen; ++i)
      ids.data<int64_t>()[b * kLen + i] = c.heldOut[(b * windows / kBatch) + i];
  std::vector<tfm::Tensor> out = session.run(entry.c_str(), {&ids});
  const float *logits = out[0].data<float>();
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t i = 0; i < kLen; ++i) {
      const float *row = logits + (b * kLen + i) * vocab;
      float m = *std::max_element(row, row + vocab);
      double z = 0;
      for (int64_t k = 0; k < vocab; ++k)
        z += std::exp(double(row[k] - m));
      int64_t next = c.heldOut[(b * windows / kBatch) + i + 1];
      sum += std::log(z) + m - row[next];
      ++count;
    }
  return sum / double(count);
}

/// Continues `prompt` by `n` characters, sampling at temperature 0.7 from
/// the last position of a sliding window of the model's length.
std::string generate(tfm::Session &session, const std::string &entry, const Corpus &c,
                     const std::string &prompt, int n, example::Rng &rng) {
  int64_t vocab = int64_t(c.chars.size());
  std::vector<int64_t> context;
  for (char ch : prompt)
    context.push_back(c.index(ch));
  tfm::Tensor ids(TFM_DTYPE_I64, {kBatch, kLen});
  std::string out = prompt;
  for (int step = 0; step < n; ++step) {
    size_t from = context.size() > size_t(kLen) ? context.size() - kLen : 0;
    int64_t used = int64_t(context.size() - from);
    std::fill(ids.data<int64_t>(), ids.data<int64_t>() + kBatch * kLen, 0);
    std::copy(context.begin() + from, context.end(), ids.data<int64_t>());
    std::vector<tfm::Tensor> logits = session.run(entry.c_str(), {&ids});
    const float *row = logits[0].data<float>() + (used - 1) * vocab;
    float m = *std::max_element(row, row + vocab);
    std::vector<double> p(vocab);
    double z = 0;
    for (int64_t k = 0; k < vocab; ++k)
      z += p[k] = std::exp(double(row[k] - m) / 0.7);
    double u = rng.uniform() * z;
    int64_t pick = 0;
    while (pick + 1 < vocab && (u -= p[pick]) > 0)
      ++pick;
    context.push_back(pick);
    out += c.chars[pick];
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-') {
    std::fprintf(stderr, "usage: %s GPT.so CORPUS.txt [--steps N] [--checkpoint FILE]\n",
                 argv[0]);
    return 2;
  }
  try {
    long steps = example::optionInt(argc, argv, "--steps", 300);
    std::string checkpoint = example::checkpointOption(argc, argv);
    Corpus corpus = readCorpus(argv[2]);
    int64_t vocab = int64_t(corpus.chars.size());

    tfm::Context context;
    tfm::Module module(context, argv[1]);
    tfm::Session session(module);
    std::string entry = example::inferenceEntry(module);
    tfm_tensor_desc_t out;
    tfm::check(tfm_module_entry_io(module.get(), entry.c_str(), 1, 0, &out));
    if (out.rank != 3 || out.dims[2] != vocab)
      throw std::runtime_error("the model predicts " + std::to_string(out.dims[out.rank - 1]) +
                               " characters but the corpus has " + std::to_string(vocab) +
                               "; regenerate the model from this corpus (make_models.py)");

    double initial = heldOutLoss(session, entry, corpus, vocab), last = initial;
    std::printf("training %s on %zu characters of %s (%zu held out, vocabulary %ld); "
                "held-out loss %.3f\n",
                argv[1], corpus.train.size(), argv[2], corpus.heldOut.size(), long(vocab),
                initial);
    tfm::Tensor ids(TFM_DTYPE_I64, {kBatch, kLen}), labels(TFM_DTYPE_I64, {kBatch, kLen});
    example::Rng rng(1);
    auto start = std::chrono::steady_clock::now();
    double sum = 0;
    double best = initial;
    for (long step = 1; step <= steps; ++step) {
      for (int64_t b = 0; b < kBatch; ++b) {
        int64_t at = corpus.trainStarts[rng.below(int64_t(corpus.trainStarts.size()))];
        for (int64_t i = 0; i < kLen; ++i) {
          ids.data<int64_t>()[b * kLen + i] = corpus.train[at + i];
          labels.data<int64_t>()[b * kLen + i] = corpus.train[at + i + 1];
        }
      }
      double l = session.run("train_step", {&ids, &labels})[0].data<float>()[0];
      if (!std::isfinite(l))
        throw std::runtime_error("the loss is not finite at step " + std::to_string(step));
      sum += l;
      if (step % 100 == 0 || step == steps) {
        last = heldOutLoss(session, entry, corpus, vocab);
        best = std::min(best, last);
        long span = step % 100 ? step % 100 : 100;
        std::printf("step %5ld  loss %.3f  held-out loss %.3f  (%.1f s)\n", step,
                    sum / double(span), last, example::seconds(start));
        std::fflush(stdout);
        sum = 0;
      }
    }
    session.saveCheckpoint(checkpoint);
    std::printf("checkpoint %s\n", checkpoint.c_str());
    example::Rng sampler(7);
    auto sampled = std::chrono::steady_clock::now();
    std::printf("sample (rerunning the model on a sliding window):\n%s\n",
                generate(session, entry, corpus, "A compiler ", 240, sampler).c_str());
    double rerunMs = example::seconds(sampled) * 1000.0 / 240;
    // Compiled with --generate as well: the same session's trained
    // parameters, one token per step with the KV cache.
    if (int64_t length = tfm_module_generation_max_length(module.get())) {
      const std::string prompt = "A compiler ";
      std::vector<int64_t> ids;
      for (char ch : prompt)
        ids.push_back(corpus.index(ch));
      tfm::GenerateOptions o;
      o.sample = 1;
      o.temperature = 0.7;
      o.seed = 7;
      o.max_new_tokens = length - int64_t(ids.size());
      tfm::Generation g = session.generate(ids, o);
      std::string text = prompt;
      for (int64_t t : g.sequences.at(0))
        text += corpus.chars[t];
      std::printf("sample (KV cache, %ld tokens at most):\n%s\n", long(length),
                  text.c_str());
      std::printf("%.3f ms per token with the cache, %.3f ms rerunning the model\n",
                  g.decodeMs / double(g.steps), rerunMs);
    }
    std::printf("held-out loss: %.3f untrained, %.3f at best, %.3f at the end\n", initial,
                best, last);
    if (!(best < initial - 1.0)) {
      std::fprintf(stderr, "error: the held-out loss fell by less than one nat\n");
      return 1;
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
