// Tests controller/OverlapModel.h: the bucket pipeline's exposed sync in closed
// form (one bucket, buckets hidden behind backward, a queue on the comm
// thread), the measured inputs (small buckets as measured, the comm thread's
// overhead on the large ones, no timings = nothing overlaps), and the
// averaging of steps.
#include "controller/OverlapModel.h"
#include "util/Error.h"

#include <gtest/gtest.h>

using gradzip::trainer::exposedSync;
using gradzip::trainer::OverlapInputs;
using gradzip::trainer::OverlapTimings;

TEST(OverlapModel, OneBucketHandedOverAtBackwardsEndIsExposedInFull) {
  const std::vector<double> h{0.10}, w{0.03};
  EXPECT_DOUBLE_EQ(exposedSync(h, w, 0.10), 0.03);
  // Handed over 5 ms before the end: 5 ms of it hide.
  EXPECT_NEAR(exposedSync(std::vector<double>{0.095}, w, 0.10), 0.025, 1e-12);
  // Handed over after backward (unused parameters, finishStep): all of it and the gap.
  EXPECT_NEAR(exposedSync(std::vector<double>{0.11}, w, 0.10), 0.04, 1e-12);
}

TEST(OverlapModel, EarlyBucketsHideAndTheCommThreadQueues) {
  // Backward ends at 100 ms; buckets handed over at 40, 70 and 100 ms.
  const std::vector<double> h{0.04, 0.07, 0.10};
  // 20 ms each: the first two finish at 60 and 90 ms, hidden; the last is exposed.
  EXPECT_NEAR(exposedSync(h, std::vector<double>{0.02, 0.02, 0.02}, 0.10), 0.02, 1e-12);
  // 50 ms each: a queue, 40 + 50 = 90, max(90, 70) + 50 = 140, 140 + 50 = 190.
  EXPECT_NEAR(exposedSync(h, std::vector<double>{0.05, 0.05, 0.05}, 0.10), 0.09, 1e-12);
  // Nothing to do: nothing exposed.
  EXPECT_DOUBLE_EQ(exposedSync(h, std::vector<double>{0, 0, 0}, 0.10), 0.0);
  EXPECT_THROW(exposedSync(h, std::vector<double>{0.01}, 0.10), gradzip::UserError);
}

TEST(OverlapModel, InputsTakeSmallBucketsAsMeasuredAndAddTheThreadsOverhead) {
  OverlapInputs in;
  in.handover = {0.04, 0.07, 0.10};
  in.overhead = {0.001, 0.002, 0.003};
  in.busy = {0.5, 0.006, 0.5};  // bucket 1 is small: 6 ms as measured
  in.large = {0, 2};
  in.backwardEnd = 0.10;
  // Bucket 0: 40 + 1 + 29 = 70; bucket 1: max(70, 70) + 6 = 76; bucket 2:
  // max(76, 100) + 3 + 17 = 120 → 20 ms exposed.
  EXPECT_NEAR(in.exposed(std::vector<double>{0.029, 0.017}), 0.02, 1e-12);
  EXPECT_THROW(in.exposed(std::vector<double>{0.029}), gradzip::UserError);
  // Without timings nothing overlaps: the sum (the paper's Eq. 4 charge).
  OverlapInputs none;
  none.large = {0, 2};
  EXPECT_NEAR(none.exposed(std::vector<double>{0.029, 0.017}), 0.046, 1e-12);
}

TEST(OverlapModel, TimingsAverageStepsAndClampTheOverhead) {
  OverlapTimings t;
  EXPECT_TRUE(t.empty());
  EXPECT_TRUE(t.inputs({0}).handover.empty());
  t.add(std::vector<double>{0.02, 0.10}, std::vector<double>{0.010, 0.030}, std::vector<double>{0.008, 0.031}, 0.10);
  t.add(std::vector<double>{0.04, 0.12}, std::vector<double>{0.014, 0.030}, std::vector<double>{0.010, 0.029}, 0.12);
  const auto in = t.inputs({1});
  EXPECT_EQ(in.large, std::vector<int>{1});
  ASSERT_EQ(in.handover.size(), 2u);
  EXPECT_NEAR(in.handover[0], 0.03, 1e-12);
  EXPECT_NEAR(in.handover[1], 0.11, 1e-12);
  EXPECT_NEAR(in.busy[0], 0.012, 1e-12);
  // Bucket 0: (2 + 4) / 2 ms; bucket 1: (0 (clamped from −1) + 1) / 2 ms.
  EXPECT_NEAR(in.overhead[0], 0.003, 1e-12);
  EXPECT_NEAR(in.overhead[1], 0.0005, 1e-12);
  EXPECT_NEAR(in.backwardEnd, 0.11, 1e-12);
  t.clear();
  EXPECT_TRUE(t.empty());
}
