// A decision's follow-up: the next followup_steps steps on the plan it chose,
// compared with what it predicted (and, where it explored the plan, measured)
// for them. Predictions and measurements are split into base (the step
// without the training thread's wait for the sync after backward) and
// exposed sync, so the decision log says which part a prediction missed.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace gradzip::trainer {

struct Followup {
  int64_t step = -1;  // the decision's step; -1: none to follow
  double predicted = 0, explored = 0;
  // The prediction's split, NaN where the chosen point was not predicted
  // (the running plan kept).
  double predictedBase = NAN, predictedExposed = NAN;
  double sum = 0, sumBase = 0, sumExposed = 0;  // over the steps so far
  int64_t count = 0;

  // One more step of `seconds`, `exposed` of them waiting for the sync.
  // True when this was the `steps`-th: record() is due. Nothing once done.
  bool add(double seconds, double exposed, int64_t steps);
  // The `followup` record of `plan` (its key) over the steps added.
  nlohmann::json record(const std::string& plan) const;
};

}  // namespace gradzip::trainer
