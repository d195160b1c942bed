//===- SearchTest.cpp - Greedy, beam search and sampling ------------------===//
//
// The expected hypotheses come from make_search_cases.py, which writes
// greedy decoding, beam search and sampling from their definitions with
// PyTorch, on a toy model whose logits are a pure function of the prefix
// (tfm's counter-based generator keyed by a hash of it), which this test
// computes the same way.
//
//===----------------------------------------------------------------------===//

#include "Search.h"
#include "cpu/VectorIsa.h"
#include "cpu/VectorMath.h"

#include "tfm/CounterRNG.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

using namespace tfm::runtime;

namespace {

struct Case {
  std::map<std::string, std::string> params;
  std::vector<Hypothesis> expected;
  double num(const std::string &k) const { return std::stod(params.at(k)); }
};

std::vector<Case> readCases() {
  std::ifstream in(TFM_SEARCH_CASES);
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "case") {
      cases.emplace_back();
      std::string k, v;
      while (words >> k >> v)
        cases.back().params[k] = v;
    } else if (kind == "hyp") {
      Hypothesis h;
      words >> h.score >> h.logProb;
      int64_t t;
      while (words >> t)
        h.tokens.push_back(t);
      cases.back().expected.push_back(h);
    }
  }
  return cases;
}

std::vector<float> toyLogits(uint64_t model, const std::vector<int64_t> &prefix,
                             int64_t vocab) {
  uint64_t h = tfm_rng_mix64(model);
  for (int64_t t : prefix)
    h = tfm_rng_mix64(h ^ static_cast<uint64_t>(t + 1));
  std::vector<float> out(vocab);
  for (int64_t v = 0; v < vocab; ++v)
    out[v] = static_cast<float>(6 * tfm_rng_uniform(h, v) - 3);
  return out;
}

TEST(Search, MatchesTheDefinitions) {
  std::vector<Case> cases = readCases();
  ASSERT_EQ(cases.size(), 7u) << "cannot read " << TFM_SEARCH_CASES;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.params.at("name"));
    SearchOptions o;
    o.beamWidth = static_cast<int64_t>(c.num("beam"));
    o.lengthPenalty = c.num("alpha");
    o.endToken = static_cast<int64_t>(c.num("end"));
    o.earlyStopping = c.num("early") != 0;
    o.sample = c.num("sample") != 0;
    o.temperature = c.num("temp");
    o.topK = static_cast<int64_t>(c.num("topk"));
    o.topP = c.num("topp");
    o.seed = static_cast<uint64_t>(c.num("seed"));
    o.maxNewTokens = static_cast<int64_t>(c.num("max"));
    int64_t vocab = static_cast<int64_t>(c.num("vocab"));
    uint64_t model = static_cast<uint64_t>(c.num("model"));
    Search search(o, vocab);
    int64_t steps = 0;
    while (!search.done()) {
      // The caller's side: one row of logits per live hypothesis.
      std::vector<float> rows;
      for (const Hypothesis &h : search.liveHypotheses()) {
        std::vector<float> l = toyLogits(model, h.tokens, vocab);
        rows.insert(rows.end(), l.begin(), l.end());
      }
      std::vector<int64_t> parents = search.advance(rows.data());
      ASSERT_LE(++steps, o.maxNewTokens);
      if (!search.done()) {
        EXPECT_EQ(parents.size(), search.live());
      }
    }
    std::vector<Hypothesis> got = search.results();
    ASSERT_EQ(got.size(), c.expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tokens, c.expected[i].tokens) << "hypothesis " << i;
      EXPECT_NEAR(got[i].logProb, c.expected[i].logProb, 1e-9);
      EXPECT_NEAR(got[i].score, c.expected[i].score, 1e-9);
    }
  }
}

TEST(Search, ParentsNameTheRowsEachBeamContinues) {
  // Beam 2 over a vocabulary of 3: after the first step both beams continue
  // row 0 (the only one); after the second, each names the row its prefix
  // came from.
  SearchOptions o;
  o.beamWidth = 2;
  o.maxNewTokens = 3;
  Search search(o, 3);
  const float first[] = {0.f, 2.f, 1.f};
  EXPECT_EQ(search.advance(first), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(search.lastTokens(), (std::vector<int64_t>{1, 2}));
  // Row 1 (prefix [2]) makes token 0 very likely; row 0 is flat.
  const float second[] = {0.f, 0.f, 0.f, 9.f, 0.f, 0.f};
  std::vector<int64_t> parents = search.advance(second);
  ASSERT_EQ(parents.size(), 2u);
  EXPECT_EQ(parents[0], 1);
  EXPECT_EQ(search.liveHypotheses()[0].tokens, (std::vector<int64_t>{2, 0}));
}

#if defined(__x86_64__)
// The Search's normalizer takes e^x in double lanes (every x ≤ 0 there):
// within 2 ulp of libm's exp over [-708, 0] and past both ends, NaN kept,
// 0 below the lowest.
__attribute__((target("avx2,fma"))) void expectDoubleExpLanes() {
  std::vector<double> xs{0.0, -0.0, -1e-300, -1e-17, -0.34657359, -0.5,
                         -1.0, -707.9, -708.0};
  for (int i = 0; i <= 200000; ++i)
    xs.push_back(-708.0 * i / 200000.0 - 1e-3 * (i % 7));
  xs.resize(xs.size() / 4 * 4);
  for (size_t i = 0; i < xs.size(); i += 4) {
    double got[4];
    _mm256_storeu_pd(got, cpu::expDoubleLanes(_mm256_loadu_pd(&xs[i])));
    for (int l = 0; l < 4; ++l) {
      double x = xs[i + l], want = std::exp(x);
      if (x < cpu::kExpDoubleLowest) {
        EXPECT_EQ(got[l], 0.0) << "at " << x;
        continue;
      }
      EXPECT_LE(std::fabs(got[l] - want), 2 * std::ldexp(DBL_EPSILON, std::ilogb(want)))
          << "at " << x << ": " << got[l] << " against " << want;
    }
  }
  double edge[4] = {NAN, -INFINITY, -708.5, -1000.0}, got[4];
  _mm256_storeu_pd(got, cpu::expDoubleLanes(_mm256_loadu_pd(edge)));
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(got[1], 0.0);
  EXPECT_EQ(got[2], 0.0);
  EXPECT_EQ(got[3], 0.0);
}

TEST(Search, DoubleExpLanesFollowLibm) {
  if (cpu::vectorIsa() == cpu::VectorIsa::Scalar)
    GTEST_SKIP() << "no AVX2 within DNNL_MAX_CPU_ISA";
  expectDoubleExpLanes();
}
#endif

} // namespace
