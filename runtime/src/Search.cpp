//===- Search.cpp - Choosing generated tokens: greedy, beam, sampling -----===//

#include "Search.h"
#include "cpu/VectorIsa.h"
#include "cpu/VectorMath.h"

#include "tfm/CounterRNG.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace tfm::runtime;

namespace {

/// log Σ_v exp(row[v] / temperature), in double: what each logit less is
/// its log-probability.
#if defined(__x86_64__)
/// logNormalizer in four lanes: the same terms, summed in another order. One
/// libm exp a logit had been about 0.15 ms of a greedy step over 32000.
__attribute__((target("avx2,fma"))) double
logNormalizerAvx2(const float *row, int64_t n, double temperature) {
  // The peak of row / t is the peak of row, divided: a division by t > 0
  // keeps the order. maxps returns its second operand when either is NaN:
  // NaNs are passed over, as std::max passes them.
  __m256 peaks = _mm256_set1_ps(-INFINITY);
  int64_t v = 0;
  for (; v + 8 <= n; v += 8)
    peaks = _mm256_max_ps(_mm256_loadu_ps(row + v), peaks);
  float lanes[8];
  _mm256_storeu_ps(lanes, peaks);
  float top = -INFINITY;
  for (float l : lanes)
    top = std::max(top, l);
  for (; v < n; ++v)
    top = std::max(top, row[v]);
  const double peak = top / temperature;
  // Every logit −inf: each term is NaN, as std::exp(−inf − −inf) is. A
  // temperature of 1 (greedy, beams) divides by nothing.
  const bool divide = temperature != 1.0;
  const __m256d t = _mm256_set1_pd(temperature), shift = _mm256_set1_pd(peak);
  __m256d sums = _mm256_setzero_pd();
  for (v = 0; v + 4 <= n; v += 4) {
    __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(row + v));
    if (divide)
      x = _mm256_div_pd(x, t);
    sums = _mm256_add_pd(sums, cpu::expDoubleLanes(_mm256_sub_pd(x, shift)));
  }
  double parts[4];
  _mm256_storeu_pd(parts, sums);
  double sum = (parts[0] + parts[1]) + (parts[2] + parts[3]);
  for (; v < n; ++v)
    sum += std::exp(row[v] / temperature - peak);
  return peak + std::log(sum);
}
#endif

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) int64_t
skipBelowAvx2(const float *row, int64_t v, int64_t n, float worst) {
  const __m256 w = _mm256_set1_ps(worst);
  for (; v + 8 <= n; v += 8)
    if (_mm256_movemask_ps(
            _mm256_cmp_ps(_mm256_loadu_ps(row + v), w, _CMP_NLT_UQ)))
      break;
  return v;
}
#endif

/// The first v' ≥ v, stepping by eight, whose eight logits are not all
/// below `worst` (a NaN is not below), or the tail of fewer than eight:
/// most of a greedy step's logits are, once two are kept.
int64_t skipBelow(const float *row, int64_t v, int64_t n, float worst) {
#if defined(__x86_64__)
  if (cpu::vectorIsa() != cpu::VectorIsa::Scalar)
    return skipBelowAvx2(row, v, n, worst);
#endif
  for (; v + 8 <= n; v += 8)
    if (!std::all_of(row + v, row + v + 8, [&](float l) { return l < worst; }))
      break;
  return v;
}

double logNormalizer(const float *row, int64_t n, double temperature) {
#if defined(__x86_64__)
  if (cpu::vectorIsa() != cpu::VectorIsa::Scalar)
    return logNormalizerAvx2(row, n, temperature);
#endif
  double peak = -INFINITY;
  for (int64_t v = 0; v < n; ++v)
    peak = std::max(peak, row[v] / temperature);
  double sum = 0;
  for (int64_t v = 0; v < n; ++v)
    sum += std::exp(row[v] / temperature - peak);
  return peak + std::log(sum);
}

/// log(softmax(row / temperature)) in double.
std::vector<double> logSoftmax(const float *row, int64_t n, double temperature) {
  std::vector<double> out(n);
  double norm = logNormalizer(row, n, temperature);
  for (int64_t v = 0; v < n; ++v)
    out[v] = row[v] / temperature - norm;
  return out;
}

struct Candidate {
  int64_t row, token;
  double logProb;
};

/// The order candidates are kept in: the most likely first; equal ones by
/// row, then by token, so that the order is total.
bool ranksBefore(const Candidate &a, const Candidate &b) {
  if (a.logProb != b.logProb)
    return a.logProb > b.logProb;
  return a.row != b.row ? a.row < b.row : a.token < b.token;
}

} // namespace

Search::Search(const SearchOptions &options, int64_t vocab)
    : opts(options), vocab(vocab) {
  if (opts.sample)
    opts.beamWidth = 1;
  opts.beamWidth = std::max<int64_t>(opts.beamWidth, 1);
  beams.push_back(Hypothesis{});
  finishedSearch = opts.maxNewTokens <= 0;
}

std::vector<int64_t> Search::lastTokens() const {
  std::vector<int64_t> out;
  for (const Hypothesis &h : beams)
    out.push_back(h.tokens.empty() ? -1 : h.tokens.back());
  return out;
}

double Search::penalized(const Hypothesis &h) const {
  if (opts.lengthPenalty == 0)
    return h.logProb;
  double length = static_cast<double>(h.tokens.size());
  return h.logProb / std::pow((5.0 + length) / 6.0, opts.lengthPenalty);
}

std::vector<int64_t> Search::sampleStep(const float *logits) {
  std::vector<double> lp = logSoftmax(logits, vocab, opts.temperature);
  // Most likely first; equal ones by token id, so the order is total.
  std::vector<int64_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lp[a] > lp[b]; });
  size_t keep = opts.topK > 0 ? std::min<size_t>(opts.topK, order.size())
                              : order.size();
  if (opts.topP < 1.0) {
    double mass = 0;
    size_t i = 0;
    while (i < keep) {
      mass += std::exp(lp[order[i++]]);
      if (mass >= opts.topP)
        break;
    }
    keep = i;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i)
    total += std::exp(lp[order[i]]);
  double u = tfm_rng_uniform(opts.seed, static_cast<uint64_t>(step)) * total;
  int64_t token = order[keep - 1];
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += std::exp(lp[order[i]]);
    if (u < acc) {
      token = order[i];
      break;
    }
  }
  Hypothesis &h = beams[0];
  h.tokens.push_back(token);
  h.logProb += std::log(std::exp(lp[token]) / total);
  h.score = penalized(h);
  ++step;
  if (token == opts.endToken) {
    ended.push_back(h);
    beams.clear();
  }
  finishedSearch = beams.empty() || step >= opts.maxNewTokens;
  return beams.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{0};
}

std::vector<int64_t> Search::advance(const float *logits) {
  if (finishedSearch)
    return {};
  if (opts.sample)
    return sampleStep(logits);
  // The best 2·K: enough that K go on even if K of them end here. Only a
  // row's own best 2·K can be among them, so each row is read once, into a
  // short sorted list, instead of ranking the vocabulary of every row.
  size_t k = static_cast<size_t>(opts.beamWidth);
  size_t take = std::min<size_t>(beams.size() * vocab, 2 * k);
  size_t perRow = std::min<size_t>(vocab, take);
  std::vector<Candidate> candidates;
  candidates.reserve(beams.size() * perRow);
  for (size_t b = 0; b < beams.size(); ++b) {
    const float *row = logits + b * vocab;
    const double norm = logNormalizer(row, vocab, 1.0), prior = beams[b].logProb;
    const size_t first = candidates.size();
    // A logit below the worst kept one cannot rank before it: its
    // log-probability is at most as high, and its token comes later.
    float worst = -INFINITY;
    auto consider = [&](int64_t v) {
      if (row[v] < worst)
        return;
      Candidate c{static_cast<int64_t>(b), v, prior + (row[v] / 1.0 - norm)};
      if (candidates.size() - first == perRow) {
        if (!ranksBefore(c, candidates.back()))
          return;
        candidates.pop_back();
      }
      candidates.insert(std::upper_bound(candidates.begin() + first,
                                         candidates.end(), c, ranksBefore),
                        c);
      if (candidates.size() - first == perRow)
        worst = row[candidates.back().token];
    };
    for (int64_t v = 0; v < vocab;) {
      v = skipBelow(row, v, vocab, worst);
      for (const int64_t end = std::min<int64_t>(vocab, v + 8); v < end; ++v)
        consider(v);
    }
  }
  std::sort(candidates.begin(), candidates.end(), ranksBefore);
  candidates.resize(std::min(candidates.size(), take));
  std::vector<Hypothesis> next;
  std::vector<int64_t> rows;
  for (size_t i = 0; i < candidates.size() && next.size() < k; ++i) {
    const Candidate &c = candidates[i];
    Hypothesis h = beams[c.row];
    h.tokens.push_back(c.token);
    h.logProb = c.logProb;
    h.score = penalized(h);
    if (c.token == opts.endToken) {
      // An ending among the best K ends a hypothesis; below them it would
      // not have been kept.
      if (i < k)
        ended.push_back(std::move(h));
      continue;
    }
    next.push_back(std::move(h));
    rows.push_back(c.row);
  }
  beams = std::move(next);
  ++step;
  std::stable_sort(ended.begin(), ended.end(),
                   [](const Hypothesis &a, const Hypothesis &b) {
                     return a.score > b.score;
                   });
  if (ended.size() > k)
    ended.resize(k);
  finishedSearch = beams.empty() || step >= opts.maxNewTokens ||
                   (opts.earlyStopping && ended.size() >= k);
  if (finishedSearch)
    return {};
  return rows;
}

std::vector<Hypothesis> Search::results() const {
  auto best = [](std::vector<Hypothesis> v) {
    std::stable_sort(v.begin(), v.end(),
                     [](const Hypothesis &a, const Hypothesis &b) {
                       return a.score > b.score;
                     });
    return v;
  };
  std::vector<Hypothesis> all = best(ended);
  size_t k = static_cast<size_t>(opts.beamWidth);
  // Too few ended when the search stopped: the best live ones fill in.
  if (finishedSearch)
    for (const Hypothesis &h : best(beams))
      if (all.size() < k)
        all.push_back(h);
  if (all.size() > k)
    all.resize(k);
  return all;
}
