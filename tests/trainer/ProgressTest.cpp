// Tests of trainer/Progress: the live line's fields (step, epoch, loss as it
// is, last metrics, ETA, skipped steps) and the duration format.
#include "trainer/Progress.h"

#include <gtest/gtest.h>

#include <cmath>

using gradzip::trainer::Progress;

TEST(Progress, DurationFormat) {
  EXPECT_EQ(Progress::duration(12.4), "12s");
  EXPECT_EQ(Progress::duration(185), "3m05s");
  EXPECT_EQ(Progress::duration(3725), "1h02m");
  EXPECT_EQ(Progress::duration(NAN), "?");
}

TEST(Progress, LineShowsNonFiniteLossAndSkippedSteps) {
  Progress p(true, 10, 4, false);
  EXPECT_EQ(p.line(5, NAN, 100, 3), "step 5/10 (50%) epoch 1.25 loss nan | 100 samples/s | ETA ? | 3 steps skipped");
  gradzip::trainer::TtaRow row;
  row.metrics = {{"accuracy", 0.5}};
  p.evaluation(row);
  EXPECT_EQ(p.line(6, 0.25, 100, 0), "step 6/10 (60%) epoch 1.50 loss 0.2500 accuracy 0.5000 | 100 samples/s | ETA ?");
}
