// Tests controller/Triggers.h: the controller's phase and a drift trigger move
// only along their named transitions.
#include "controller/Triggers.h"

#include <gtest/gtest.h>

using gradzip::trainer::decisionTaken;
using gradzip::trainer::Phase;
using gradzip::trainer::provisionalTaken;
using gradzip::trainer::Trigger;

TEST(Triggers, ThePhaseMovesForwardOnly) {
  EXPECT_EQ(provisionalTaken(Phase::Warmup), Phase::Provisional);
  EXPECT_EQ(decisionTaken(Phase::Provisional), Phase::Decided);
  EXPECT_EQ(decisionTaken(Phase::Warmup), Phase::Decided);  // provisional step off
  // A provisional step after a decision (a resumed run) does not go back.
  EXPECT_EQ(provisionalTaken(Phase::Decided), Phase::Decided);
}

TEST(Triggers, ATriggerJudgesOnlyOnceCalibrated) {
  Trigger t;
  EXPECT_EQ(t.state(), Trigger::State::Calibrating);
  t.judge(true);  // no reference yet: no verdict
  EXPECT_FALSE(t.fired());
  EXPECT_FALSE(t.watching());
  t.calibrated();
  EXPECT_EQ(t.state(), Trigger::State::Watching);
  t.judge(true);
  EXPECT_TRUE(t.fired());
  t.judge(false);  // each step judged afresh
  EXPECT_EQ(t.state(), Trigger::State::Watching);
  t.judge(true);
  t.quiet();  // keeps the reference
  EXPECT_EQ(t.state(), Trigger::State::Watching);
  t.judge(true);
  t.recalibrate();  // a new plan
  EXPECT_EQ(t.state(), Trigger::State::Calibrating);
  t.quiet();
  EXPECT_EQ(t.state(), Trigger::State::Calibrating);
}
