// Implements controller/DriftDetector.h.
#include "controller/DriftDetector.h"

#include "util/Error.h"

#include <cmath>

namespace gradzip::trainer {

DriftDetector::DriftDetector(double threshold, double smoothing, int64_t warmup)
    : threshold_(threshold), smoothing_(smoothing), warmup_(warmup) {
  GZ_CHECK(threshold > 0, "drift threshold must be positive, got {}", threshold);
  GZ_CHECK(smoothing > 0 && smoothing <= 1, "drift smoothing must be in (0, 1], got {}", smoothing);
  GZ_CHECK(warmup >= 1, "drift warm-up must be at least 1 observation, got {}", warmup);
}

void DriftDetector::reset(double reference) {
  GZ_CHECK(std::isfinite(reference) && reference > 0, "drift reference must be positive and finite, got {}",
           reference);
  reference_ = reference;
  smoothed_ = reference;
  seen_ = 0;
}

double DriftDetector::signedChange() const { return reference_ > 0 ? (smoothed_ - reference_) / reference_ : 0; }
double DriftDetector::change() const { return std::abs(signedChange()); }

bool DriftDetector::update(double value) {
  if (reference_ <= 0 || !std::isfinite(value) || value <= 0) return false;
  smoothed_ = (1 - smoothing_) * smoothed_ + smoothing_ * value;
  ++seen_;
  return seen_ >= warmup_ && change() >= threshold_;
}

}  // namespace gradzip::trainer
