// Tests of the Pareto front and knee rule (controller/Pareto.h) on synthetic
// fronts and logged ones: dominated and non-finite points, the knee under each
// scale and time tolerance, when a candidate could replace the running plan,
// which side of the front a gain decision follows; and the statistical costs
// the knee weighs (controller/ControllerOptions.h statisticalCost), on the
// numbers logged at real decisions.
#include "controller/ControllerOptions.h"
#include "controller/Pareto.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using gradzip::trainer::couldReplace;
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
