// Learning-rate schedule as a pure function of the step: linear warm-up, then
// constant, step decay or cosine annealing to min_lr over the run. Being a pure
// function of (step, total steps), it needs no checkpointed state beyond the
// step counter.
#pragma once

#include "trainer/OptimOptions.h"

#include <cstdint>

namespace gradzip::trainer {

class LrSchedule {
 public:
  // baseLr already includes any world-size scaling.
  LrSchedule(ScheduleOptions o, double baseLr, int64_t totalSteps, int64_t stepsPerEpoch);
  // Learning rate for `step` (0-based).
  double at(int64_t step) const;

 private:
  ScheduleOptions o_;
  double base_;
  int64_t total_;
  int64_t perEpoch_;
};

// The base lr scaled with the world size as OptimOptions::scaleWithWorld says.
double scaledLr(const OptimOptions& o, int worldSize);

}  // namespace gradzip::trainer
