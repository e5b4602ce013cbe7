// Tests the MOO controller's decision rules: the Pareto front and knee rule
// (trainer/Pareto.h) on synthetic fronts, and the drift triggers
// (trainer/DriftDetector.h) on constructed sequences whose trigger step is
// computed in closed form.
#include "trainer/ControllerDetail.h"
#include "trainer/ControllerOptions.h"
#include "trainer/DriftDetector.h"
#include "trainer/Pareto.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <cmath>

using gradzip::trainer::couldReplace;
using gradzip::trainer::DriftDetector;
using gradzip::trainer::KneeScale;
using gradzip::trainer::kneePoint;
using gradzip::trainer::Objectives;
using gradzip::trainer::paretoFront;

TEST(Pareto, FrontDropsDominatedAndNonFinitePoints) {
  const std::vector<Objectives> pts = {{1, 10}, {2, 4}, {5, 5}, {3, 2}, {4, 1.5}, {10, 1}, {2, 4}, {NAN, 0.1},
                                       {0.5, INFINITY}};
  // (5, 5) is dominated by (3, 2); the duplicate (2, 4) stays; NaN/Inf never count.
  EXPECT_EQ(paretoFront(pts), (std::vector<size_t>{0, 1, 3, 4, 5, 6}));
  EXPECT_TRUE(paretoFront({}).empty());
}

TEST(Pareto, KneeIsNearestTheIdealAfterNormalisation) {
  // Normalised over the front: t = (0, 1/9, 2/9, 1/3, 1), s = (1, 1/3, 1/9, 1/18, 0).
  // Distances at w = 0.5: 0.707, 0.248, 0.176, 0.239, 0.707 -> the knee is (3, 2).
  const std::vector<Objectives> pts = {{1, 10}, {2, 4}, {3, 2}, {4, 1.5}, {10, 1}, {5, 5}};
  EXPECT_EQ(kneePoint(pts), 2u);
  EXPECT_EQ(kneePoint(pts, 1.0), 0u);  // only time counts: the fastest
  EXPECT_EQ(kneePoint(pts, 0.0), 4u);  // only accuracy counts: the most accurate
  // Units do not matter: milliseconds and a scaled statistical cost pick the same plan.
  std::vector<Objectives> scaled;
  for (auto p : pts) scaled.push_back({p.time * 1000, p.stat * 0.01});
  EXPECT_EQ(kneePoint(scaled), 2u);
}

TEST(Pareto, RelativeKneeWeighsSpeedupAgainstError) {
  using gradzip::trainer::KneeScale;
  // Two points: min-max scaling makes them a tie (the faster wins); relative
  // scaling weighs 4% faster, (0.04, 0), against 0.08 more vNMSE, (0, 0.08):
  // distances at w = 0.5 are 0.028 for the slow exact plan and 0.057 for the
  // fast lossy one.
  const std::vector<Objectives> two = {{0.050, 0.0}, {0.048, 0.08}};
  EXPECT_EQ(kneePoint(two), 1u);
  EXPECT_EQ(kneePoint(two, 0.5, KneeScale::Relative), 0u);
  // A slow network: 200 ms dense against 60 ms at 0.02 vNMSE and 50 ms at 0.99:
  // relative times (2.33, 0.2, 0), errors (0, 0.02, 0.99); distances 1.65,
  // 0.142, 0.700 -> the middle plan.
  const std::vector<Objectives> slow = {{0.200, 0.0}, {0.060, 0.02}, {0.050, 0.99}};
  EXPECT_EQ(kneePoint(slow, 0.5, KneeScale::Relative), 1u);
  EXPECT_EQ(kneePoint(slow, 1.0, KneeScale::Relative), 2u);
  EXPECT_EQ(kneePoint(slow, 0.0, KneeScale::Relative), 0u);
  EXPECT_THROW(kneePoint({{0.0, 1.0}}, 0.5, KneeScale::Relative), gradzip::UserError);
}

TEST(Pareto, KneeEdgeCases) {
  EXPECT_EQ(kneePoint({{3, 3}}), 0u);
  // Equal distances: the lower time wins. (1,2) and (2,1) are symmetric.
  EXPECT_EQ(kneePoint({{2, 1}, {1, 2}}), 1u);
  // The non-finite candidate is skipped even when it would look ideal.
  EXPECT_EQ(kneePoint({{NAN, 0}, {2, 2}}), 1u);
  EXPECT_THROW(kneePoint({{NAN, 1}}), gradzip::UserError);
  EXPECT_THROW(kneePoint({{1, 1}}, 1.5), gradzip::UserError);
}

// The decisions logged in fmnist_resnet20_n2_unshaped and _n2_20M (step 20,
// fp16 running): unshaped, fp16 measured at 85 ms is the step's compute, so
// neither TopK 0.1% predicted at 85 ms (vNMSE 0.65) nor fp32 at 87 ms (vNMSE
// 0) is worth exploring; at 20 Mbit/s fp16 takes 331 ms and TopKC 2-bit,
// predicted at 128 ms with vNMSE 0.53, is. A candidate with fp16's vNMSE and a
// 4% faster predicted step is explored at margin 0, but not at margin 0.05
// (4% faster becomes ~1% slower).
TEST(Pareto, CouldReplaceTheRunningPlan) {
  const auto rel = KneeScale::Relative;
  const Objectives fp16Unshaped{0.085, 4.3e-8};
  EXPECT_FALSE(couldReplace(fp16Unshaped, {0.085, 0.65}, 0.05, 0.85, rel));
  EXPECT_FALSE(couldReplace(fp16Unshaped, {0.087, 0.0}, 0.05, 0.85, rel));
  const Objectives fp16Slow{0.331, 4.3e-8};
  EXPECT_TRUE(couldReplace(fp16Slow, {0.128, 0.53}, 0.05, 0.85, rel));
  EXPECT_TRUE(couldReplace(fp16Slow, {0.96 * 0.331, 4.3e-8}, 0.0, 0.85, rel));
  EXPECT_FALSE(couldReplace(fp16Slow, {0.96 * 0.331, 4.3e-8}, 0.05, 0.85, rel));
  // More accurate at the same predicted time: worth it at any weight below 1.
  EXPECT_TRUE(couldReplace({0.1, 0.5}, {0.1, 0.01}, 0.0, 0.85, rel));
  // Nothing measured for the running plan: every finite candidate; a
  // candidate that failed screening: never.
  EXPECT_TRUE(couldReplace({INFINITY, INFINITY}, {0.2, 0.5}, 0.05, 0.85, rel));
  EXPECT_FALSE(couldReplace(fp16Slow, {INFINITY, INFINITY}, 0.05, 0.85, rel));
  EXPECT_THROW(couldReplace(fp16Slow, {0.1, 0.1}, -0.1, 0.85, rel), gradzip::UserError);
}

// The three statistical costs on the numbers logged at fmnist_resnet20_n2_20M's
// decisions: THC 4-bit (vNMSE 0.024), TopKC 2-bit (0.6), TopK 1.1% (0.775).
TEST(StatisticalCost, VnmseGainAndErrorFeedbackContraction) {
  using gradzip::trainer::statisticalCost;
  EXPECT_DOUBLE_EQ(statisticalCost("vnmse", 0.6, 0.5), 0.6);
  EXPECT_DOUBLE_EQ(statisticalCost("gain", 0.6, 0.5), 2.0);
  EXPECT_NEAR(statisticalCost("ef", 0.024, 1.0), 0.024 / 0.976, 1e-12);  // ~ vNMSE when small
  EXPECT_DOUBLE_EQ(statisticalCost("ef", 0.6, 0.5), 1.5);                // 1/δ − 1, δ = 0.4
  EXPECT_NEAR(statisticalCost("ef", 0.775, 0.3), 0.775 / 0.225, 1e-12);  // 3.44: 2.3x TopKC's
  EXPECT_EQ(statisticalCost("ef", 1.0, 0.0), INFINITY);
  EXPECT_EQ(statisticalCost("gain", 0.5, 0.0), INFINITY);
  EXPECT_EQ(statisticalCost("vnmse", NAN, 1.0), INFINITY);
}

// β from observed collectives: 1 MB at 20 Mbit/s (β = 4e-7 s/B) plus 2α with
// α = 1 ms is 0.402 s, so (t − 2α)/m gives β back; α-bound observations (a
// 100-byte all-gather at 2.1 ms < 2·2α) are left out, and with fewer than 5
// usable observations there is no estimate. The median ignores one burst.
TEST(ObservedBeta, MedianOfTheBandwidthBoundObservations) {
  using gradzip::comm::AlphaBetaSample;
  using gradzip::trainer::detail::observedBeta;
  const double alpha = 1e-3, beta = 4e-7;
  std::vector<AlphaBetaSample> s;
  for (int i = 0; i < 4; ++i) s.push_back({2, 1e6, 2 * alpha + 1e6 * beta});
  s.push_back({2, 100, 2.1e-3});  // α-bound: not used
  EXPECT_EQ(observedBeta(s, alpha), INFINITY);  // 4 usable < 5
  s.push_back({2, 1e6, 2 * alpha + 1e6 * beta * 10});  // one burst of waiting
  s.push_back({2, 1e6, 2 * alpha + 1e6 * beta});
  EXPECT_NEAR(observedBeta(s, alpha), beta, 1e-15);
}

TEST(DriftDetector, JumpTriggersNoiseDoesNot) {
  DriftDetector d(0.10, 0.5);
  d.reset(1.0);
  EXPECT_FALSE(d.update(1.0));
  EXPECT_TRUE(d.update(1.3));  // smoothed 1.15: +15%
  EXPECT_NEAR(d.change(), 0.15, 1e-12);

  // ±15% alternating noise around the reference with smoothing λ = 0.1: the
  // moving average oscillates by at most 0.15·λ/(2 − λ) ≈ 0.8%.
  DriftDetector quiet(0.10, 0.1);
  quiet.reset(1.0);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(quiet.update(i % 2 ? 1.15 : 0.85)) << "observation " << i;
}

TEST(DriftDetector, SustainedShiftTriggersAtTheClosedFormStep) {
  // A level shift to 1.25 with smoothing 0.1: smoothed_k = 1.25 − 0.25·0.9^k
  // reaches 1.10 when 0.9^k <= 0.6, i.e. at k = 5.
  DriftDetector d(0.10, 0.1);
  d.reset(1.0);
  int k = 0;
  while (!d.update(1.25)) ++k;
  EXPECT_EQ(k + 1, 5);
  // Downward shifts count too.
  d.reset(2.0);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(d.update(1.5));
  EXPECT_TRUE(d.update(1.5));
}

TEST(DriftDetector, WarmupAndBadObservations) {
  DriftDetector d(0.10, 1.0, 3);
  d.reset(1.0);
  EXPECT_FALSE(d.update(5.0));  // 1st observation: warming up
  EXPECT_FALSE(d.update(NAN));  // ignored
  EXPECT_FALSE(d.update(-1));   // ignored
  EXPECT_FALSE(d.update(5.0));  // 2nd
  EXPECT_TRUE(d.update(5.0));   // 3rd
  DriftDetector unset(0.1, 0.5);
  EXPECT_FALSE(unset.update(3.0));  // no reference yet
  EXPECT_THROW(DriftDetector(0, 0.5), gradzip::UserError);
  EXPECT_THROW(DriftDetector(0.1, 0), gradzip::UserError);
  EXPECT_THROW(d.reset(0), gradzip::UserError);
}
