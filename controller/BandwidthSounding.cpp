// Implements controller/BandwidthSounding.h.
#include "controller/BandwidthSounding.h"

#include "util/Error.h"

#include <algorithm>
#include <cmath>

namespace gradzip::trainer {

BandwidthSounding::BandwidthSounding(double threshold) : threshold_(threshold) {
  GZ_CHECK(threshold > 0, "BandwidthSounding: threshold must be > 0, got {}", threshold);
}

int64_t BandwidthSounding::bytesFor(double share, double seconds, double beta, int n) {
  GZ_CHECK(n >= 1, "BandwidthSounding: {} ranks", n);
  double bytes = share * seconds / beta;
  if (!std::isfinite(bytes)) bytes = double(kMinBytes);
  const int64_t clamped = std::clamp(int64_t(bytes), kMinBytes, kMaxBytes);
  const int64_t unit = 4 * int64_t(n);
  return (clamped + unit - 1) / unit * unit;
}

double BandwidthSounding::betaOf(double seconds, int64_t bytes, int n, double alpha) {
  GZ_CHECK(n >= 2 && bytes > 0, "BandwidthSounding: a sounding needs 2 or more ranks and bytes, got {} and {}", n,
           bytes);
  // Table I, ring all-reduce: 2(N−1) latency terms, 2(N−1)/N·M bytes per rank.
  const double m = 2.0 * (n - 1) / n * double(bytes);
  const double wire = seconds - 2.0 * (n - 1) * std::max(0.0, alpha);
  return std::max(wire, 1e-3 * seconds) / m;
}

void BandwidthSounding::reset(double expected) {
  reference_ = latest_ = 0;
  expected_ = std::isfinite(expected) && expected > 0 ? expected : 0;
  suspect_ = 0;
  last_ = Verdict::Steady;
}

BandwidthSounding::Verdict BandwidthSounding::add(double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) return last_;
  return last_ = classify(seconds);
}

BandwidthSounding::Verdict BandwidthSounding::classify(double t) {
  latest_ = t;
  const double factor = 1 + threshold_;
  if (reference_ <= 0) {
    if (t < expected_ / factor - kNoiseSeconds) {  // the decision's model saw a slower link
      reference_ = expected_;
      suspect_ = -1;
      return Verdict::Suspect;
    }
    reference_ = t;
    return Verdict::Reference;
  }
  const int way = t > reference_ * factor + kNoiseSeconds   ? 1
                  : t < reference_ / factor - kNoiseSeconds ? -1
                                                            : 0;
  if (way == 0) {
    suspect_ = 0;
    return Verdict::Steady;
  }
  if (suspect_ == way) return Verdict::Changed;
  suspect_ = way;
  return Verdict::Suspect;
}

double BandwidthSounding::change() const { return reference_ > 0 && latest_ > 0 ? latest_ / reference_ : 1.0; }

}  // namespace gradzip::trainer
