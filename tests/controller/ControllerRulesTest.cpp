// Tests the MOO controller's decision rules: the Pareto front and knee rule
// (controller/Pareto.h) on synthetic fronts and logged ones, and the drift triggers
// (controller/DriftDetector.h) on constructed sequences whose trigger step is
// computed in closed form, when a settled change is acted on
// (controller/ControllerDetail.h actOnChange), and the bandwidth soundings'
// sizes, β and verdicts (controller/BandwidthSounding.h).
#include "controller/BandwidthSounding.h"
#include "controller/ControllerDetail.h"
#include "controller/ControllerOptions.h"
#include "controller/DriftDetector.h"
#include "controller/Pareto.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <cmath>

using gradzip::trainer::couldReplace;
using gradzip::trainer::DriftDetector;
using gradzip::trainer::followGain;
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
  EXPECT_EQ(kneePoint(pts, 0.5, KneeScale::MinMax), 2u);
  EXPECT_EQ(kneePoint(pts, 1.0, KneeScale::MinMax), 0u);  // only time counts: the fastest
  EXPECT_EQ(kneePoint(pts, 0.0, KneeScale::MinMax), 4u);  // only accuracy counts: the most accurate
  // Units do not matter: milliseconds and a scaled statistical cost pick the same plan.
  std::vector<Objectives> scaled;
  for (auto p : pts) scaled.push_back({p.time * 1000, p.stat * 0.01});
  EXPECT_EQ(kneePoint(scaled, 0.5, KneeScale::MinMax), 2u);
}

TEST(Pareto, RelativeKneeWeighsSpeedupAgainstError) {
  using gradzip::trainer::KneeScale;
  // Two points: min-max scaling makes them a tie (the faster wins); relative
  // scaling weighs 4% faster, (0.04, 0), against 0.08 more vNMSE, (0, 0.08):
  // distances at w = 0.5 are 0.028 for the slow exact plan and 0.057 for the
  // fast lossy one.
  const std::vector<Objectives> two = {{0.050, 0.0}, {0.048, 0.08}};
  EXPECT_EQ(kneePoint(two, 0.5, KneeScale::MinMax), 1u);
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

TEST(Pareto, TimeToleranceIgnoresSavingsWithinTheModelsError) {
  using gradzip::trainer::KneeScale;
  // The step-10 front of a 20 Mbit/s ResNet-20 run on 11-26 (ef_rate costs, one
  // point per compressor): TopK 0.1%, TopK 3.3% allgather, TopKC b=2, THC 4-bit
  // all-reduce, fp16. TopK 3.3% is predicted 2.8% faster than TopKC b=2 at
  // 2.4x its cost; with relative scaling at w = 0.85 the knee takes it
  // (distance 0.148 against 0.158).
  const std::vector<Objectives> front = {
      {0.1881, 3.0413}, {0.2137, 0.2183}, {0.2197, 0.0921}, {0.2532, 0.0003}, {0.4485, 0.0}};
  EXPECT_EQ(kneePoint(front, 0.85, KneeScale::Relative), 1u);
  EXPECT_EQ(kneePoint(front, 0.85, KneeScale::Relative, 0.0), 1u);
  // 2.8% is within a 5% tolerance: TopK 3.3% is out, TopKC b=2 is the knee.
  // At 2% it stays. The scales are still the whole front's: TopK 0.1% has
  // nothing within 5% of it that costs less, so t_min is unchanged.
  EXPECT_EQ(kneePoint(front, 0.85, KneeScale::Relative, 0.05), 2u);
  EXPECT_EQ(kneePoint(front, 0.85, KneeScale::Relative, 0.02), 1u);
  // The cheapest point always stays: at a tolerance of 10 every other point
  // is within 11x of fp16's time and costs more, so only fp16 remains.
  EXPECT_EQ(kneePoint(front, 0.85, KneeScale::Relative, 10.0), 4u);
  // Near twins do not dominate: TopK 1.1% allgather and AR-TopK 1.1% over the
  // ring (10 Mbit/s, 11-26) screen 1e-6 apart, and the faster stays the knee.
  const std::vector<Objectives> twins = {{0.2159, 4.7391}, {0.2212, 4.739099}};
  EXPECT_EQ(kneePoint(twins, 0.85, KneeScale::Relative, 0.05), 0u);
  EXPECT_THROW(kneePoint(front, 0.85, KneeScale::Relative, -0.01), gradzip::UserError);
  EXPECT_THROW(kneePoint(front, 0.85, KneeScale::Relative, NAN), gradzip::UserError);
}

TEST(Pareto, LogKneeTakesTheLeastPredictedTimeToTheTarget) {
  // The provisional (step-2) front of a 50 Mbit/s ResNet-20 run (seed 9,
  // 2026-12-02, ef_rate costs, one point per compressor): TopK 0.1%, TopK
  // 3.3%, TopKC b=2, THC 4-bit all-reduce, fp16. The relative knee at w =
  // 0.85 takes TopKC b=2 (its step 7.5% over TopK 0.1%'s, THC's 15.6%); the
  // log knee at w = 0.5 the least time x (1 + cost): 0.1731 x 1.0006 against
  // 0.1610 x 1.1119 for TopKC b=2 and 0.1605 x 1.2713 for TopK 3.3%.
  const std::vector<Objectives> front = {
      {0.1498, 2.0133}, {0.1605, 0.2713}, {0.1610, 0.1119}, {0.1731, 0.0006}, {0.2417, 0.0}};
  EXPECT_EQ(kneePoint(front, 0.85, KneeScale::Relative, 0.04), 2u);
  EXPECT_EQ(kneePoint(front, 0.5, KneeScale::Log), 3u);
  EXPECT_EQ(kneePoint(front, 0.5, KneeScale::Log, 0.04), 3u);
  // The weight tilts it: all on time, the fastest; all on the cost, fp16.
  EXPECT_EQ(kneePoint(front, 1.0, KneeScale::Log), 0u);
  EXPECT_EQ(kneePoint(front, 0.0, KneeScale::Log), 4u);
  // At w = 0.5 it is the least time x (1 + stat) on any front (random
  // fronts, fixed seed, checked against the product by brute force).
  uint64_t state = 12345;
  auto uniform = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(state >> 11) / double(1ULL << 53);
  };
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Objectives> pts(8);
    for (auto& p : pts) p = {0.05 + uniform(), 3 * uniform()};
    size_t best = 0;
    for (size_t i = 1; i < pts.size(); ++i)
      if (pts[i].time * (1 + pts[i].stat) < pts[best].time * (1 + pts[best].stat)) best = i;
    EXPECT_EQ(kneePoint(pts, 0.5, KneeScale::Log), best) << "trial " << trial;
  }
  // The 20 Mbit/s front of Pareto.TimeToleranceIgnoresSavingsWithinTheModelsError:
  // TopKC b=2, 0.2197 x 1.0921, against THC's 0.2532 x 1.0003.
  EXPECT_EQ(kneePoint({{0.1881, 3.0413}, {0.2137, 0.2183}, {0.2197, 0.0921}, {0.2532, 0.0003}, {0.4485, 0.0}},
                      0.5, KneeScale::Log),
            2u);
  EXPECT_THROW(kneePoint({{1.0, -1.0}, {2.0, 0.5}}, 0.5, KneeScale::Log), gradzip::UserError);
  EXPECT_THROW(kneePoint({{0.0, 0.1}}, 0.5, KneeScale::Log), gradzip::UserError);
}

TEST(Pareto, KneeEdgeCases) {
  EXPECT_EQ(kneePoint({{3, 3}}, 0.5, KneeScale::MinMax), 0u);
  // Equal distances: the lower time wins. (1,2) and (2,1) are symmetric.
  EXPECT_EQ(kneePoint({{2, 1}, {1, 2}}, 0.5, KneeScale::MinMax), 1u);
  // The non-finite candidate is skipped even when it would look ideal.
  EXPECT_EQ(kneePoint({{NAN, 0}, {2, 2}}, 0.5, KneeScale::MinMax), 1u);
  EXPECT_THROW(kneePoint({{NAN, 1}}, 0.5, KneeScale::MinMax), gradzip::UserError);
  EXPECT_THROW(kneePoint({{1, 1}}, 1.5, KneeScale::MinMax), gradzip::UserError);
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

TEST(Pareto, GainTriggeredDecisionsFollowTheGain) {
  // The screening of fmnist_resnet20_n2_20M's step-220 decision, rounded
  // (runs/*/decisions.jsonl): fp16, TopKC b=2, TopK 3.3%, the running TopK
  // 1.1%, TopK 0.4% and 0.1%, as (predicted step s, vNMSE).
  const std::vector<Objectives> pts{{0.304, 0.0}, {0.114, 0.608}, {0.110, 0.584},
                                    {0.095, 0.672}, {0.089, 0.725}, {0.087, 0.806}};
  const double own = pts[3].stat;
  auto finite = [](const std::vector<Objectives>& v) {
    std::vector<size_t> out;
    for (size_t i = 0; i < v.size(); ++i)
      if (std::isfinite(v[i].time)) out.push_back(i);
    return out;
  };
  // The gain fell 12%: only what compresses less than TopK 1.1% remains, and
  // the knee is one of them.
  const auto fell = followGain(pts, own, -0.12);
  EXPECT_EQ(finite(fell), (std::vector<size_t>{0, 1, 2}));
  EXPECT_LT(fell[kneePoint(fell, 0.85, KneeScale::Relative)].stat, own);
  // It rose: only the sparser ones.
  EXPECT_EQ(finite(followGain(pts, own, 0.12)), (std::vector<size_t>{4, 5}));
  // Its twin through another collective, or AR-TopK at its ratio (screened
  // 1e-4 apart), is not "less compression".
  auto twins = pts;
  twins.push_back({0.097, own - 1e-4});
  EXPECT_EQ(finite(followGain(twins, own, -0.12)), (std::vector<size_t>{0, 1, 2}));
  // The running plan unscreened, or no change: every point stays.
  EXPECT_EQ(finite(followGain(pts, NAN, -0.12)).size(), pts.size());
  EXPECT_EQ(finite(followGain(pts, own, 0.0)).size(), pts.size());
  // Nothing compresses less than fp32: nothing is left to explore.
  EXPECT_TRUE(paretoFront(followGain(pts, 0.0, -0.5)).empty());
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

// ef_rate: k·v/(1 − v)² for a plan under error feedback (Karimireddy et al.
// 2019, Thm II: the bound's compression term over its noise term is
// 8γL(1 − δ)/δ², δ = 1 − v), the plain vNMSE for any other plan.
TEST(StatisticalCost, ErrorFeedbackRateOnlyForErrorFeedbackPlans) {
  using gradzip::trainer::statisticalCost;
  const double k = 0.015;
  EXPECT_NEAR(statisticalCost("ef_rate", 0.6, 0.5, true, k), k * 0.6 / 0.16, 1e-12);   // 0.05625
  EXPECT_NEAR(statisticalCost("ef_rate", 0.9, 0.1, true, k), k * 0.9 / 0.01, 1e-12);   // 1.35: 24x
  EXPECT_NEAR(statisticalCost("ef_rate", 0.02, 1.0, true, k), k * 0.02 / 0.9604, 1e-12);
  EXPECT_DOUBLE_EQ(statisticalCost("ef_rate", 0.08, 1.0, false, k), 0.08);  // C_nat: unbiased, no memory
  EXPECT_EQ(statisticalCost("ef_rate", 1.0, 0.0, true, k), INFINITY);
  EXPECT_EQ(statisticalCost("ef_rate", NAN, 1.0, true, k), INFINITY);
  EXPECT_DOUBLE_EQ(statisticalCost("ef_rate", 0.6, 0.5, true, 0.0), 0.0);  // k = 0: only time counts
}

// The decision that cost schedule_c1's seed 2 (runs22, step 140, 20 Mbit/s):
// predicted THC 4-bit all-reduce 0.369 s at vNMSE 0.022, TopK 1.1% 0.315 s at
// 0.713, fp16 0.546 s at 0. Under vnmse the knee (time_weight 0.85, relative)
// takes THC, whose measured steps were then 40% slower than TopK's; under
// ef_rate TopK. fp16 at 3% slower than TopK 1.1% stays the knee under both.
TEST(StatisticalCost, ErrorFeedbackRateMovesTheKneeFromThcToTopK) {
  using namespace gradzip::trainer;
  auto front = [](const std::string& stat) {
    return std::vector<Objectives>{{0.369, statisticalCost(stat, 0.022, 0.975, true)},
                                   {0.315, statisticalCost(stat, 0.713, 0.549, true)},
                                   {0.546, statisticalCost(stat, 0.0, 1.0, false)}};
  };
  EXPECT_EQ(kneePoint(front("vnmse"), 0.85, KneeScale::Relative), 0u);
  EXPECT_EQ(kneePoint(front("ef_rate"), 0.85, KneeScale::Relative), 1u);
  const std::vector<Objectives> nearlyLossless{{0.315 * 1.03, 0.0},
                                               {0.315, statisticalCost("ef_rate", 0.713, 0.549, true)}};
  EXPECT_EQ(kneePoint(nearlyLossless, 0.85, KneeScale::Relative), 0u);
}

// β from observed collectives: 1 MB at 20 Mbit/s (β = 4e-7 s/B) plus 2α with
// α = 1 ms is 0.402 s, so (t − 2α)/m gives β back; α-bound observations (a
// 100-byte all-gather at 2.1 ms < 2·2α) are left out, and with fewer than 5
// usable observations (or the count asked for) there is no estimate. The
// median ignores one burst.
TEST(ObservedBeta, MedianOfTheBandwidthBoundObservations) {
  using gradzip::comm::AlphaBetaSample;
  using gradzip::trainer::detail::observedBeta;
  const double alpha = 1e-3, beta = 4e-7;
  std::vector<AlphaBetaSample> s;
  for (int i = 0; i < 4; ++i) s.push_back({2, 1e6, 2 * alpha + 1e6 * beta});
  s.push_back({2, 100, 2.1e-3});  // α-bound: not used
  EXPECT_EQ(observedBeta(s, alpha), INFINITY);  // 4 usable < 5
  // A sharp change's refit asks for exactly as many as its steps gave.
  EXPECT_NEAR(observedBeta(s, alpha, 4), beta, 1e-15);
  EXPECT_EQ(observedBeta(std::vector<AlphaBetaSample>{}, alpha, 0), INFINITY);  // none: no estimate
  s.push_back({2, 1e6, 2 * alpha + 1e6 * beta * 10});  // one burst of waiting
  s.push_back({2, 1e6, 2 * alpha + 1e6 * beta});
  EXPECT_NEAR(observedBeta(s, alpha), beta, 1e-15);
}

// Sizes: 2% of 50 steps of 0.1 s at 5 Mbit/s (β = 1.6e-6 s/B) is 62.5 KB,
// raised to the 64 KB floor (over a 1 ms token-bucket burst up to 500 Mbit/s);
// 2% of 50 s at 10 MB/s is 10 MB, capped at 4 MB; at 1 Gbit/s, 2% of 0.5 s
// is 1.25 MB, rounded up to whole float32 elements split over 3 ranks (12 B).
TEST(BandwidthSounding, SizesClampAndRoundToWholeElements) {
  using gradzip::trainer::BandwidthSounding;
  EXPECT_EQ(BandwidthSounding::bytesFor(0.02, 5.0, 1.6e-6, 2), 65536);
  EXPECT_EQ(BandwidthSounding::bytesFor(0.02, 50.0, 1e-7, 2), 4 << 20);
  EXPECT_EQ(BandwidthSounding::bytesFor(0.02, 0.5, 8e-9, 3), 1250004);  // 1,250,000 -> next multiple of 12
  EXPECT_EQ(BandwidthSounding::bytesFor(0.02, 5.0, 0.0, 2), 65536);     // no bandwidth known: the floor
  EXPECT_EQ(BandwidthSounding::periodicBytes(2), 65536);
  EXPECT_EQ(BandwidthSounding::periodicBytes(3), 65544);                 // 64 KB rounded up to 12 B
}

// β from one ring all-reduce (Table I: 2(N−1)α + 2(N−1)/N·M·β): 1 MB on 4
// ranks at β = 4e-7 s/B (20 Mbit/s) with α = 1 ms takes 6 ms + 0.6 s, which
// gives β back; a time below the latency terms still gives a positive β;
// with α = 0 it is the effective β t/m.
TEST(BandwidthSounding, BetaFromTheRingAllReduceCost) {
  using gradzip::trainer::BandwidthSounding;
  const double alpha = 1e-3, beta = 4e-7, m = 1.5e6;
  EXPECT_NEAR(BandwidthSounding::betaOf(6 * alpha + m * beta, 1000000, 4, alpha), beta, 1e-15);
  EXPECT_GT(BandwidthSounding::betaOf(1e-3, 65536, 2, alpha), 0.0);
  EXPECT_DOUBLE_EQ(BandwidthSounding::betaOf(0.6, 1000000, 4, 0.0), 0.6 / m);  // effective β, latency included
  EXPECT_THROW(BandwidthSounding::betaOf(1.0, 65536, 1, alpha), gradzip::UserError);
}

// Threshold 0.6 (network_drift 0.3 doubled), times in seconds: the first
// sounding is the reference; within a factor 1.6 is steady, and so is any
// change within kNoiseSeconds (1 ms: latency noise of a fast link); one
// beyond both is suspect and a steady one clears it; two beyond the same way
// are a change, two beyond in opposite directions are not; only a confirmed
// change is one for the decision (confirmedChange); reset starts over.
TEST(BandwidthSounding, TwoSoundingsBeyondTheThresholdAreAChange) {
  using gradzip::trainer::BandwidthSounding;
  using V = BandwidthSounding::Verdict;
  BandwidthSounding s(0.6);
  EXPECT_EQ(s.change(), 1.0);
  EXPECT_EQ(s.add(0.052), V::Reference);  // 64 KB at 10 Mbit/s
  EXPECT_EQ(s.add(0.078), V::Steady);     // 1.5x
  EXPECT_EQ(s.add(0.036), V::Steady);     // 1/1.44
  EXPECT_EQ(s.add(NAN), V::Steady);       // ignored
  EXPECT_EQ(s.add(3e-4), V::Suspect);     // the link recovered ...
  EXPECT_EQ(s.confirmedChange(), 1.0);    // not yet confirmed
  EXPECT_EQ(s.add(0.05), V::Steady);      // ... once: noise
  EXPECT_EQ(s.add(3e-4), V::Suspect);
  EXPECT_EQ(s.add(0.2), V::Suspect);      // the other way: starts a new suspicion
  EXPECT_EQ(s.add(3e-4), V::Suspect);
  EXPECT_EQ(s.add(6e-4), V::Changed);
  EXPECT_NEAR(s.change(), 6e-4 / 0.052, 1e-15);
  EXPECT_EQ(s.confirmedChange(), s.change());
  EXPECT_EQ(s.latest(), 6e-4);
  EXPECT_EQ(s.add(-1.0), V::Changed);  // ignored: the verdict stands
  // On the fast link: 0.1 to 0.9 ms is a factor 9 but within the noise floor.
  s.reset();
  EXPECT_EQ(s.add(1e-4), V::Reference);
  EXPECT_EQ(s.add(9e-4), V::Steady);
  EXPECT_EQ(s.add(9e-4), V::Steady);
  EXPECT_EQ(s.add(2e-3), V::Suspect);  // 20x and 1.9 ms more: beyond both
}

// A decision taken on a 10 Mbit/s link just before it recovered: its model
// predicts 52 ms for a sounding. A first sounding of 0.3 ms after it is
// suspect (the model's time becomes the reference) and a second confirms the
// change; one within the factor of the prediction, one slower than predicted
// (the plan's own collectives show a slower link), and one below the noise
// floor of a fast link's prediction are references as before.
TEST(BandwidthSounding, AFirstSoundingMuchFasterThanTheModelPredictsIsSuspect) {
  using gradzip::trainer::BandwidthSounding;
  using V = BandwidthSounding::Verdict;
  BandwidthSounding s(0.6);
  s.reset(0.052);
  EXPECT_EQ(s.add(3e-4), V::Suspect);
  EXPECT_EQ(s.add(4e-4), V::Changed);
  EXPECT_NEAR(s.change(), 4e-4 / 0.052, 1e-15);
  s.reset(0.052);
  EXPECT_EQ(s.add(0.034), V::Reference);  // 1/1.53 of the prediction
  EXPECT_EQ(s.add(0.035), V::Steady);
  s.reset(0.052);
  EXPECT_EQ(s.add(0.2), V::Reference);
  s.reset(1.2e-3);                       // a fast link's prediction
  EXPECT_EQ(s.add(1e-4), V::Reference);  // 12x faster, but within 1 ms
  s.reset(NAN);
  EXPECT_EQ(s.add(1e-4), V::Reference);
}

TEST(ControllerRules, ASevereSlowdownWaitsNetworkIntervalButNotTheFalseAlarmsBackoff) {
  using gradzip::trainer::detail::actOnChange;
  // network_interval 30. An ordinary change waits 30 steps times the
  // backoff: 120 after two false alarms.
  EXPECT_FALSE(actOnChange(false, true, 29, 30, 1));
  EXPECT_TRUE(actOnChange(false, true, 30, 30, 1));
  EXPECT_FALSE(actOnChange(false, true, 119, 30, 4));
  EXPECT_TRUE(actOnChange(false, true, 120, 30, 4));
  // A severe or sharp slowdown after a decision that measured its
  // references, no false alarm since: at once.
  EXPECT_TRUE(actOnChange(true, true, 1, 30, 1));
  // After a predicted knee, or after false alarms: network_interval, never
  // the backoff's 120 (schedule_c1_small_buckets seeds 2 and 4 waited from
  // step 102 to 223 with fp16 on the 20 Mbit/s link).
  EXPECT_FALSE(actOnChange(true, false, 29, 30, 1));
  EXPECT_TRUE(actOnChange(true, false, 30, 30, 1));
  EXPECT_FALSE(actOnChange(true, true, 17, 30, 4));
  EXPECT_TRUE(actOnChange(true, true, 30, 30, 4));
  EXPECT_TRUE(actOnChange(true, false, 30, 30, 4));
}

TEST(DriftDetector, JumpTriggersNoiseDoesNot) {
  DriftDetector d(0.10, 0.5);
  d.reset(1.0);
  EXPECT_FALSE(d.update(1.0));
  EXPECT_TRUE(d.update(1.3));  // smoothed 1.15: +15%
  EXPECT_NEAR(d.change(), 0.15, 1e-12);
  EXPECT_NEAR(d.signedChange(), 0.15, 1e-12);
  d.reset(1.0);
  EXPECT_TRUE(d.update(0.7));  // a fall: the same size, the sign tells
  EXPECT_NEAR(d.change(), 0.15, 1e-12);
  EXPECT_NEAR(d.signedChange(), -0.15, 1e-12);

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
