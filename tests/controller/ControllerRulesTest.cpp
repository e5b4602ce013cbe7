// Tests of the rules by which the controller sees a change and acts on it:
// β from the bandwidth-bound observed collectives (controller/
// ControllerDetail.h observedBeta), the bandwidth soundings' sizes, β and
// verdicts (controller/BandwidthSounding.h), when a settled change is acted
// on (ControllerDetail.h actOnChange), and the drift triggers
// (controller/DriftDetector.h) on constructed sequences whose trigger step is
// computed in closed form.
#include "comm/CostModel.h"
#include "controller/BandwidthSounding.h"
#include "controller/ControllerDetail.h"
#include "controller/DriftDetector.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using gradzip::trainer::DriftDetector;

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
