// Tests of controller/GradientNoise.h: McCandlish et al.'s two-batch estimates
// of |G|² and tr(Σ) (exact on expected norms, unbiased on sampled batches),
// their collective measurement on a sample of coordinates over a real Gloo
// group, and §2.3's steps at another batch size.
#include "compress/kernels/CounterRng.h"
#include "tests/testing/ThreadGroup.h"
#include "controller/GradientNoise.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <mutex>

namespace gradzip::trainer {
namespace {

TEST(GradientNoise, EstimatesAreExactOnExpectedNorms) {
  // |G|² = 4, tr(Σ) = 32: E|G_B|² = |G|² + tr(Σ)/B is 8 at B = 8 and 5 at B = 32.
  const auto e = estimateNoise(8.0, 5.0, 8, 32);
  EXPECT_DOUBLE_EQ(e.gradSq, 4.0);
  EXPECT_DOUBLE_EQ(e.trace, 32.0);
  GradientNoise n;
  EXPECT_TRUE(std::isnan(n.bSimple()));
  n.add(e);
  n.add({-1.0, 8.0});  // one noisy step: the means are averaged, not the ratios
  EXPECT_DOUBLE_EQ(n.bSimple(), 40.0 / 3.0);
  n.add({-4.0, 0.0});  // Σ|G|² = 4 − 1 − 4 < 0: the noise hides the gradient
  EXPECT_TRUE(std::isnan(n.bSimple()));
}

TEST(GradientNoise, EstimatesAreUnbiasedOnSampledBatches) {
  // Per-sample gradients G + ξ, ξ ~ N(0, σ²I) in d = 64 dimensions: tr(Σ) =
  // dσ² = 16, |G|² = 1. Two ranks of b = 4 samples. Over T steps the means
  // of the estimates must be within 4 standard errors (from their sample
  // variance) of the truth; the ratio B_simple = 16 within the delta-method
  // bound of those errors.
  torch::manual_seed(7);
  const int64_t d = 64, b = 4, T = 10000;
  const double sigma = 0.5;
  auto G = torch::zeros({d}, torch::kDouble);
  G[0] = 1.0;
  const auto samples = G + sigma * torch::randn({T, 2, b, d}, torch::kDouble);
  const auto ranks = samples.mean(2);                                       // [T, 2, d]: each rank's batch mean
  const auto localSq = ranks.pow(2).sum(2).mean(1), meanSq = ranks.mean(1).pow(2).sum(1);  // [T]
  const auto ls = localSq.accessor<double, 1>(), ms = meanSq.accessor<double, 1>();
  double sg = 0, sg2 = 0, st = 0, st2 = 0;
  GradientNoise n;
  for (int64_t t = 0; t < T; ++t) {
    const auto e = estimateNoise(ls[t], ms[t], double(b), double(2 * b));
    n.add(e);
    sg += e.gradSq, sg2 += e.gradSq * e.gradSq, st += e.trace, st2 += e.trace * e.trace;
  }
  const double mg = sg / T, mt = st / T;
  const double seG = std::sqrt((sg2 / T - mg * mg) / T), seT = std::sqrt((st2 / T - mt * mt) / T);
  EXPECT_NEAR(mg, 1.0, 4 * seG);
  EXPECT_NEAR(mt, d * sigma * sigma, 4 * seT);
  const double bound = 16.0 * (4 * seT / mt + 4 * seG / mg);
  EXPECT_NEAR(n.bSimple(), 16.0, bound) << "bound " << bound;
  EXPECT_EQ(n.count(), T);
}

TEST(GradientNoise, MeasuresTheRanksGradientsOnASharedSample) {
  // Two ranks, two tensors (3000 + 2000 coordinates) each: rank r's
  // coordinate c is (r + 1)·sin(c) − r. The collective estimate equals the
  // two-batch estimate of the norms on the sampled coordinates, scaled by
  // d / kNoiseSample, recomputed here from the same stream.
  const int64_t d0 = 3000, d1 = 2000, d = d0 + d1, batch = 16;
  const uint64_t seed = 12345;
  auto value = [](int r, int64_t c) { return float((r + 1) * std::sin(double(c)) - r); };
  double localSq = 0, meanSq = 0;
  for (int64_t i = 0; i < kNoiseSample; ++i) {
    const int64_t c = int64_t(compress::randomBits(seed, uint64_t(i)) % uint64_t(d));
    const double a = value(0, c), b = value(1, c);
    localSq += (a * a + b * b) / 2;
    meanSq += ((a + b) / 2) * ((a + b) / 2);
  }
  const double scale = double(d) / double(kNoiseSample);
  const auto expected = estimateNoise(scale * localSq, scale * meanSq, double(batch), 2.0 * double(batch));
  std::mutex mu;
  std::vector<NoiseEstimate> got(2);
  testing::runRanks(2, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    auto t0 = torch::empty({d0}, torch::kFloat), t1 = torch::empty({d1}, torch::kFloat);
    for (int64_t c = 0; c < d; ++c) (c < d0 ? t0.data_ptr<float>()[c] : t1.data_ptr<float>()[c - d0]) = value(r, c);
    at::Tensor buffer;
    const auto e = measureNoise(comm, {t0, t1}, batch, seed, buffer);
    std::lock_guard<std::mutex> lock(mu);
    got[size_t(r)] = e;
  });
  for (int r = 0; r < 2; ++r) {
    // The local norms travel as one float: relative error ~1e-7.
    EXPECT_NEAR(got[size_t(r)].gradSq, expected.gradSq, 1e-5 * std::abs(expected.trace)) << "rank " << r;
    EXPECT_NEAR(got[size_t(r)].trace, expected.trace, 1e-5 * std::abs(expected.trace)) << "rank " << r;
  }
  EXPECT_EQ(got[0].gradSq, got[1].gradSq);  // every rank the same numbers
  EXPECT_EQ(got[0].trace, got[1].trace);
}

TEST(GradientNoise, CarriesStepsToAnotherBatch) {
  // S(B) = S_min·(1 + B_noise/B): with B_noise = 64, 300 steps at B = 64 are
  // S_min = 150, so 225 at B = 128 and 150.6 at B = 32768.
  EXPECT_DOUBLE_EQ(stepsAtBatch(300, 64, 128, 64), 225.0);
  EXPECT_NEAR(stepsAtBatch(300, 64, 32768, 64), 150.0 * (1 + 64.0 / 32768), 1e-9);
  EXPECT_DOUBLE_EQ(stepsAtBatch(300, 64, 64, 64), 300.0);
  // No estimate: the steps stay (weak scaling).
  EXPECT_DOUBLE_EQ(stepsAtBatch(300, 64, 128, std::nan("")), 300.0);
}

}  // namespace
}  // namespace gradzip::trainer
