//===- seq2seq.cpp - Train a Transformer to reverse sequences -------------===//
//
//   tfm-seq2seq SEQ2SEQ.so [--max-steps N] [--checkpoint FILE]
//
// Trains the encoder-decoder Transformer of seq2seq.onnx, compiled with
// `tfmc compile --train`, from its random initial weights to reverse
// sequences of 8 digits, with teacher forcing: the decoder reads the
// target shifted right behind a begin token and learns the next digit at
// every position. Every 100 steps it decodes 1024 held-out sequences
// greedily (the training batches never contain one of them) and stops
// once 99% come out right. Then it saves a checkpoint, loads it into a
// fresh session, and decodes a few sequences there: inference with the
// trained weights. When the library was also compiled with --generate, it
// decodes the held-out set again through the KV-cache entries, greedily
// and with beam search, and reports both accuracies. Exits 1 if the
// accuracy is not reached in time.
//
//===----------------------------------------------------------------------===//
#include "Common.h"

#include <cmath>
#include <cstdio>
#include <unordered_set>
#include <vector>

namespace {

constexpr int64_t kBatch = 64, kLen = 8, kVocab = 11, kBegin = 10;
constexpr int kHeldOut = 1024;

using Sequence = std::vector<int64_t>;

uint64_t key(const Sequence &s) {
  uint64_t k = 0;
  for (int64_t d : s)
    k = k * 10 + uint64_t(d);
  return k;
}

Sequence randomSequence(example::Rng &rng) {
  Sequence s(kLen);
  for (int64_t &d : s)
    d = rng.below(10);
  return s;
}

Sequence reversed(const Sequence &s) { return Sequence(s.rbegin(), s.rend()); }

/// Greedy decoding of a batch: the decoder starts from the begin token and
/// each step feeds back the most likely digit at the next position.
std::vector<Sequence> decode(tfm::Session &session, const std::string &entry,
                             const std::vector<Sequence> &sources) {
  tfm::Tensor src(TFM_DTYPE_I64, {kBatch, kLen}), tgt(TFM_DTYPE_I64, {kBatch, kLen});
  int64_t *s = src.data<int64_t>(), *t = tgt.data<int64_t>();
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t i = 0; i < kLen; ++i) {
      s[b * kLen + i] = b < int64_t(sources.size()) ? sources[b][i] : 0;
      t[b * kLen + i] = i == 0 ? kBegin : 0;
    }
  std::vector<Sequence> out(sources.size(), Sequence(kLen));
  for (int64_t i = 0; i < kLen; ++i) {
    std::vector<tfm::Tensor> logits = session.run(entry.c_str(), {&src, &tgt});
    const float *l = logits[0].data<float>();
    for (int64_t b = 0; b < int64_t(sources.size()); ++b) {
      int64_t d = example::argmax(l + (b * kLen + i) * kVocab, kVocab);
      out[b][i] = d;
      if (i + 1 < kLen)
        t[b * kLen + i + 1] = d;
    }
  }
  return out;
}

double accuracy(tfm::Session &session, const std::string &entry,
                const std::vector<Sequence> &heldOut) {
  int right = 0;
  for (size_t at = 0; at < heldOut.size(); at += kBatch) {
    std::vector<Sequence> part(heldOut.begin() + at,
                               heldOut.begin() + std::min(heldOut.size(), at + kBatch));
    std::vector<Sequence> got = decode(session, entry, part);
    for (size_t i = 0; i < part.size(); ++i)
      right += got[i] == reversed(part[i]);
  }
  return double(right) / double(heldOut.size());
}

std::string show(const Sequence &s) {
  std::string r;
  for (int64_t d : s)
    r += char('0' + d);
  return r;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: %s SEQ2SEQ.so [--max-steps N] [--checkpoint FILE]\n",
                 argv[0]);
    return 2;
  }
  try {
    long maxSteps = example::optionInt(argc, argv, "--max-steps", 4000);
    std::string checkpoint = example::checkpointOption(argc, argv);

    tfm::Context context;
    tfm::Module module(context, argv[1]);
    tfm::Session session(module);
    std::string entry = example::inferenceEntry(module);

    example::Rng heldRng(2), trainRng(1);
    std::vector<Sequence> heldOut;
    std::unordered_set<uint64_t> heldKeys;
    while (int(heldOut.size()) < kHeldOut) {
      Sequence s = randomSequence(heldRng);
      if (heldKeys.insert(key(s)).second)
        heldOut.push_back(s);
    }

    tfm::Tensor src(TFM_DTYPE_I64, {kBatch, kLen}), tgt(TFM_DTYPE_I64, {kBatch, kLen}),
        labels(TFM_DTYPE_I64, {kBatch, kLen});
    auto start = std::chrono::steady_clock::now();
    double lossSum = 0, acc = 0;
    long step = 0, since = 0;
    std::printf("training %s on sequence reversal (%ld steps at most); untrained, "
                "%.1f%% of the held-out sequences decode right\n",
                argv[1], maxSteps, accuracy(session, entry, heldOut) * 100);
    while (step < maxSteps) {
      for (int64_t b = 0; b < kBatch; ++b) {
        Sequence s;
        do
          s = randomSequence(trainRng);
        while (heldKeys.count(key(s)));
        Sequence r = reversed(s);
        for (int64_t i = 0; i < kLen; ++i) {
          src.data<int64_t>()[b * kLen + i] = s[i];
          tgt.data<int64_t>()[b * kLen + i] = i == 0 ? kBegin : r[i - 1];
          labels.data<int64_t>()[b * kLen + i] = r[i];
        }
      }
      std::vector<tfm::Tensor> loss = session.run("train_step", {&src, &tgt, &labels});
      double l = loss[0].data<float>()[0];
      if (!std::isfinite(l))
        throw std::runtime_error("the loss is not finite at step " + std::to_string(step + 1));
      lossSum += l;
      ++step;
      ++since;
      if (step % 100 == 0 || step == maxSteps) {
        acc = accuracy(session, entry, heldOut);
        std::printf("step %5ld  loss %.4f  held-out sequence accuracy %5.1f%%  (%.1f s)\n",
                    step, lossSum / double(since), acc * 100, example::seconds(start));
        std::fflush(stdout);
        lossSum = 0;
        since = 0;
        if (acc >= 0.99)
          break;
      }
    }
    if (acc < 0.99) {
      std::fprintf(stderr, "error: %.1f%% after %ld steps, short of 99%%\n", acc * 100, step);
      return 1;
    }
    session.saveCheckpoint(checkpoint);
    std::printf("reached %.1f%% after %ld steps; checkpoint %s\n", acc * 100, step,
                checkpoint.c_str());

    // Inference with the trained weights, in a session of its own.
    tfm::Session fresh(module);
    fresh.loadCheckpoint(checkpoint);
    std::vector<Sequence> some(heldOut.begin(), heldOut.begin() + 5);
    std::vector<Sequence> got = decode(fresh, entry, some);
    std::printf("greedy decoding in a new session from the checkpoint:\n");
    for (size_t i = 0; i < some.size(); ++i)
      std::printf("  %s -> %s  %s\n", show(some[i]).c_str(), show(got[i]).c_str(),
                  got[i] == reversed(some[i]) ? "ok" : "WRONG");

    // Compiled with --generate as well: the held-out set again, with the
    // encoder once per source and the decoder's keys and values cached,
    // greedy and with the paper's beam search (width 4, alpha 0.6).
    if (tfm_module_generation_max_length(module.get()) > 0) {
      for (int64_t width : {1, 4}) {
        tfm::GenerateOptions o;
        o.beam_width = width;
        o.length_penalty = width > 1 ? 0.6 : 0.0;
        o.max_new_tokens = kLen;
        auto t0 = std::chrono::steady_clock::now();
        int right = 0;
        for (const Sequence &s : heldOut) {
          o.source = s.data();
          o.source_length = s.size();
          right += fresh.generate({kBegin}, o).sequences.at(0) == reversed(s);
        }
        std::printf("%s with the KV cache: %.1f%% of the held-out sequences right "
                    "(%.2f ms per sequence)\n",
                    width > 1 ? "beam search (width 4, alpha 0.6)" : "greedy decoding",
                    100.0 * right / double(heldOut.size()),
                    example::seconds(t0) * 1000.0 / double(heldOut.size()));
      }
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
