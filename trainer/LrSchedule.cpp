// Implements trainer/LrSchedule.h.
#include "trainer/LrSchedule.h"

#include <algorithm>
#include <cmath>

namespace gradzip::trainer {

LrSchedule::LrSchedule(ScheduleOptions o, double baseLr, int64_t totalSteps, int64_t stepsPerEpoch)
    : o_(std::move(o)), base_(baseLr), total_(std::max<int64_t>(1, totalSteps)),
      perEpoch_(std::max<int64_t>(1, stepsPerEpoch)) {}

double LrSchedule::at(int64_t step) const {
  if (o_.warmupSteps > 0 && step < o_.warmupSteps) return base_ * double(step + 1) / double(o_.warmupSteps);
  if (o_.name == "step") {
    const double epoch = double(step) / double(perEpoch_);
    return base_ * std::pow(o_.gamma, std::floor(epoch / o_.stepEpochs));
  }
  if (o_.name == "cosine") {
    const int64_t span = std::max<int64_t>(1, total_ - o_.warmupSteps);
    const double t = std::clamp(double(step - o_.warmupSteps) / double(span), 0.0, 1.0);
    return o_.minLr + 0.5 * (base_ - o_.minLr) * (1.0 + std::cos(M_PI * t));
  }
  return base_;
}

double scaledLr(const OptimOptions& o, int worldSize) {
  if (o.scaleWithWorld == "linear") return o.lr * worldSize;
  if (o.scaleWithWorld == "sqrt") return o.lr * std::sqrt(double(worldSize));
  return o.lr;
}

}  // namespace gradzip::trainer
