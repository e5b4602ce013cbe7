// Tests of comm/NetworkProbe.h (ping-pong probe over real Gloo thread ranks),
// comm/AlphaBetaFit.h (closed-form recovery) and comm/LinkFitter.h (robust fit
// of synthetic observations with outliers, change detection).
#include "comm/AlphaBetaFit.h"
#include "comm/LinkFitter.h"
#include "comm/NetworkProbe.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <random>

namespace gradzip::comm {
namespace {

TEST(NetworkProbe, TwoRanksGetFinitePositiveIdenticalParams) {
  ProbeOptions o;
  o.budgetSeconds = 2.0;
  std::mutex mu;
  std::vector<NetworkParams> got(2);
  std::vector<size_t> measured(2);
  testing::runRanks(2, [&](Communicator& c) {
    ProbeResult r = probeNetwork(c, o);
    std::lock_guard<std::mutex> lock(mu);
    got[c.rank()] = r.params;
    measured[c.rank()] = r.sizes.size();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(std::isfinite(got[r].alpha) && got[r].alpha > 0) << "rank " << r << " alpha " << got[r].alpha;
    EXPECT_TRUE(std::isfinite(got[r].beta) && got[r].beta > 0) << "rank " << r << " beta " << got[r].beta;
  }
  // Broadcast from rank 0: bit-identical, not merely close.
  EXPECT_EQ(got[0].alpha, got[1].alpha);
  EXPECT_EQ(got[0].beta, got[1].beta);
  EXPECT_GE(measured[0], 2u);  // at least two sizes are always measured
  EXPECT_EQ(measured[1], 0u);  // per-size data lives on rank 0 only
}

TEST(NetworkProbe, AllPeersAgreeOnThreeRanks) {
  ProbeOptions o;
  o.sizes = {1 << 10, 64 << 10, 1 << 20};
  o.budgetSeconds = 1.0;
  o.allPeers = true;
  std::mutex mu;
  std::vector<NetworkParams> got(3);
  testing::runRanks(3, [&](Communicator& c) {
    NetworkParams p = probe(c, o);
    std::lock_guard<std::mutex> lock(mu);
    got[c.rank()] = p;
  });
  EXPECT_GT(got[0].beta, 0.0);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(got[r].alpha, got[0].alpha);
    EXPECT_EQ(got[r].beta, got[0].beta);
  }
}

TEST(NetworkProbe, OneRankIsAUserError) {
  testing::runRanks(1, [](Communicator& c) {
    EXPECT_THROW(probe(c), UserError);
    EXPECT_THROW(probeLatency(c), UserError);
  });
}

// probeLatency reads the latency term: with a 3 ms delay injected before
// every send, a half round trip is one delayed message, so α lies in
// [3 ms, 3 ms + loopback and scheduling slack] (2 ms of slack: a loopback
// round trip of 8 bytes takes ~0.1 ms; a whole round trip, 6 ms, fails the
// upper bound, and a probe that skipped the delay the lower one). Every rank
// holds rank 0's number, and the budget bounds the time (0.3 s of 6 ms
// round trips: ~50, not max_repeats' 10000).
TEST(NetworkProbe, LatencyProbeReadsTheInjectedDelayWithinItsBudget) {
  ProbeOptions o;
  o.maxRepeats = 10000;
  o.budgetSeconds = 0.3;
  std::mutex mu;
  std::vector<double> alpha(3, NAN), seconds(3, NAN);
  testing::runRanks(3, [&](Communicator& c) {
    c.setSendDelay(std::chrono::milliseconds(3));
    const auto t0 = std::chrono::steady_clock::now();
    const double a = probeLatency(c, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(mu);
    alpha[c.rank()] = a;
    seconds[c.rank()] = s;
  });
  EXPECT_GE(alpha[0], 3e-3);
  EXPECT_LE(alpha[0], 5e-3);
  EXPECT_EQ(alpha[1], alpha[0]);  // broadcast: bit-identical
  EXPECT_EQ(alpha[2], alpha[0]);  // rank 2 takes no part in the round trips (allPeers off) but gets the result
  // The budget plus the last batch started before it (at most as many round
  // trips as came before it) and the broadcast.
  EXPECT_LT(seconds[0], 2 * o.budgetSeconds + 0.1);
}

TEST(AlphaBetaFit, RecoversExactLineAndRingCoefficients) {
  const double alpha = 40e-6, beta = 1.0 / 12.5e6;  // 40 µs, 100 Mbit/s
  std::vector<AlphaBetaSample> s;
  for (double m : {1e3, 1e5, 1e7}) s.push_back({1.0, m, alpha + m * beta});
  // Ring all-reduce over N = 4 (paper Table I): 2(N−1)α + 2(N−1)/N·Mβ.
  for (double m : {1e4, 1e6}) s.push_back({6.0, 1.5 * m, 6.0 * alpha + 1.5 * m * beta});
  auto f = fitAlphaBeta(s);
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->alpha / alpha, 1.0, 1e-9);
  EXPECT_NEAR(f->beta / beta, 1.0, 1e-9);
  EXPECT_NEAR(bandwidthBitsPerSec(*f), 100e6, 1e-3);
}

TEST(AlphaBetaFit, NotIdentifiableFromOneSizeAndClampsNegativeIntercept) {
  EXPECT_FALSE(fitAlphaBeta({{1.0, 1e4, 1e-3}, {1.0, 1e4, 2e-3}}).has_value());
  // Points on t = −1 ms + M·1e-8: the free intercept is negative, so α = 0 and
  // β solves the one-parameter problem; both stay non-negative.
  auto f = fitAlphaBeta({{1.0, 1e6, 9e-3}, {1.0, 2e6, 19e-3}});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->alpha, 0.0);
  EXPECT_GT(f->beta, 0.0);
}

// Synthetic link: α = 50 µs, β = 8e-8 s/B (100 Mbit/s). Each observation is
// t·(1 + ε), ε ~ N(0, 0.05²), and with probability 0.1 an outlier t·U(3, 10).
// Tolerance: the median of 20 draws has relative std ≈ 1.2533·0.05/√20 = 1.4%,
// and 10% one-sided contamination moves it by at most the 0.5/0.9 = 0.556
// quantile, +0.14σ = 0.7%. The fit over 9 sizes has α error ≲ the noise of the
// smallest sizes and β error ≲ that of the largest: σ_fit ≲ 2%, so a 10%
// tolerance is 5σ.
constexpr double kAlpha = 50e-6;
constexpr double kBeta = 8e-8;

double noisy(double t, std::mt19937& rng) {
  std::normal_distribution<double> eps(0.0, 0.05);
  std::bernoulli_distribution outlier(0.1);
  std::uniform_real_distribution<double> slow(3.0, 10.0);
  return outlier(rng) ? t * slow(rng) : t * (1.0 + eps(rng));
}

TEST(LinkFitter, RecoversAlphaBetaFromRepeatedSizesWithOutliers) {
  std::mt19937 rng(1234);
  LinkFitter f({.window = 1000});
  for (int rep = 0; rep < 20; ++rep)
    for (double m = 64; m <= (4 << 20); m *= 4) f.addPointToPoint(m, noisy(kAlpha + m * kBeta, rng));
  auto p = f.fit();
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(p->alpha / kAlpha, 1.0, 0.10) << "alpha " << p->alpha;
  EXPECT_NEAR(p->beta / kBeta, 1.0, 0.10) << "beta " << p->beta;
}

// Every observation has its own size (no group medians possible), mixing
// point-to-point messages with ring all-reduces over N = 4; the bisquare IRLS
// must reject the outliers. 300 points, relative noise 5%: the clean fit's
// error is ≈ 0.05/√(points that pin each parameter, ≳ 50) ≈ 0.7%; the
// bisquare's efficiency loss and residual outlier leverage stay well inside
// the 10% tolerance (> 10σ).
TEST(LinkFitter, RejectsOutliersWithoutRepeatedSizes) {
  std::mt19937 rng(99);
  std::uniform_real_distribution<double> logSize(std::log(64.0), std::log(4.0 * (1 << 20)));
  LinkFitter f({.window = 1000});
  for (int i = 0; i < 300; ++i) {
    const double m = std::exp(logSize(rng));
    if (i % 2)
      f.add({6.0, 1.5 * m, noisy(6.0 * kAlpha + 1.5 * m * kBeta, rng)});
    else
      f.addPointToPoint(m, noisy(kAlpha + m * kBeta, rng));
  }
  auto p = f.fit();
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(p->alpha / kAlpha, 1.0, 0.10) << "alpha " << p->alpha;
  EXPECT_NEAR(p->beta / kBeta, 1.0, 0.10) << "beta " << p->beta;
}

TEST(LinkFitter, DetectsTwofoldBetaChangeAndNotNoise) {
  std::mt19937 rng(7);
  LinkFitter f({.window = 180});
  auto feed = [&](double beta) {
    for (int rep = 0; rep < 20; ++rep)
      for (double m = 64; m <= (4 << 20); m *= 4) f.addPointToPoint(m, noisy(kAlpha + m * beta, rng));
  };
  EXPECT_FALSE(f.fit().has_value());
  feed(kBeta);
  auto ref = f.fit();
  ASSERT_TRUE(ref.has_value());
  // Same link, fresh noise: β moves by ≲ 2% (see above), far below 25%.
  feed(kBeta);
  EXPECT_FALSE(f.betaChanged(*ref, 0.25));
  // Bandwidth halves: β doubles, a relative change of 1.0 > 0.25. The window
  // (180 = 9 sizes × 20) now holds only the new link's samples.
  feed(2 * kBeta);
  EXPECT_TRUE(f.betaChanged(*ref, 0.25));
  auto now = f.fit();
  ASSERT_TRUE(now.has_value());
  EXPECT_NEAR(now->beta / ref->beta, 2.0, 0.2);
}

TEST(LinkFitter, OneSizeIsNotIdentifiable) {
  LinkFitter f;
  for (int i = 0; i < 10; ++i) f.addPointToPoint(4096, 1e-3);
  EXPECT_FALSE(f.fit().has_value());
  EXPECT_FALSE(f.betaChanged({1e-5, 1e-8}, 0.1));
}

}  // namespace
}  // namespace gradzip::comm
