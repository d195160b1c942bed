//===- Search.h - Choosing generated tokens: greedy, beam, sampling -------===//
//
// The decoding loop asks a Search which tokens to feed next: given the
// next-token logits of each live hypothesis, it extends them and says which
// row each new hypothesis continues, so that the caller can reorder its key
// and value caches. It knows nothing of models, so it is tested on its own.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SEARCH_H
#define TFM_RUNTIME_SEARCH_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tfm::runtime {

struct SearchOptions {
  /// Hypotheses kept per step; 1 is greedy decoding (or sampling).
  int64_t beamWidth = 1;
  /// α of the length penalty ((5 + |Y|) / 6)^α that a finished hypothesis's
  /// log-probability is divided by (the Transformer paper uses 0.6).
  double lengthPenalty = 0.0;
  /// The token that ends a hypothesis; -1 for none.
  int64_t endToken = -1;
  /// Stop as soon as beamWidth hypotheses have ended.
  bool earlyStopping = true;
  /// Draw each token instead of taking the most likely (beamWidth 1).
  bool sample = false;
  double temperature = 1.0;
  /// Draw among the k most likely tokens; 0 for all.
  int64_t topK = 0;
  /// Draw among the fewest most likely tokens whose probability reaches p.
  double topP = 1.0;
  /// Token t is drawn with tfm_rng_uniform(seed, t): reproducible.
  uint64_t seed = 0;
  int64_t maxNewTokens = 16;
};

struct Hypothesis {
  std::vector<int64_t> tokens;
  double logProb = 0;
  /// logProb over the length penalty; what hypotheses are ranked by.
  double score = 0;
};

class Search {
public:
  Search(const SearchOptions &options, int64_t vocab);

  /// The number of live hypotheses, the rows the next logits must have.
  size_t live() const { return beams.size(); }
  /// The token each live hypothesis ends with (what to feed next).
  std::vector<int64_t> lastTokens() const;
  const std::vector<Hypothesis> &liveHypotheses() const { return beams; }
  /// Extends the live hypotheses by one token given their next-token logits
  /// (live() rows of `vocab` values). Returns, for each new live
  /// hypothesis, the row of the old ones it continues.
  std::vector<int64_t> advance(const float *logits);
  bool done() const { return finishedSearch; }
  /// Ends the search where it stands (the caller stops early).
  void stop() { finishedSearch = true; }
  /// The ended hypotheses, best first, at most beamWidth; when the search
  /// stopped with fewer, the best live ones fill in.
  std::vector<Hypothesis> results() const;

private:
  double penalized(const Hypothesis &h) const;
  std::vector<int64_t> sampleStep(const float *logits);

  SearchOptions opts;
  int64_t vocab;
  int64_t step = 0;
  bool finishedSearch = false;
  std::vector<Hypothesis> beams, ended;
};

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SEARCH_H
