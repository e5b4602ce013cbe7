// The MOO controller's re-decision triggers (flexible-communication paper
// §3-E; DIGEST.md §5): re-explore when the smoothed gain E||g_c||²/E||g_e||²
// moves by 10% or more from its value at the last decision, and re-solve when
// the measured latency α or inverse bandwidth β moves beyond a threshold. One
// detector watches one positive quantity: an exponential moving average of the
// observations, compared with a reference fixed at the last decision.
#pragma once

#include <cstdint>

namespace gradzip::trainer {

class DriftDetector {
 public:
  // threshold: relative change that triggers (0.10 = 10%); smoothing: weight of
  // a new observation in the moving average, in (0, 1]; warmup: observations
  // after a reset before the detector may trigger.
  DriftDetector(double threshold, double smoothing, int64_t warmup = 1);

  // Starts over from `reference` (> 0): the value the last decision used.
  void reset(double reference);
  // Adds an observation (non-finite or non-positive ones are ignored) and
  // returns whether |smoothed − reference| / reference >= threshold.
  bool update(double value);

  double smoothed() const { return smoothed_; }
  double reference() const { return reference_; }
  // Relative change of the smoothed value from the reference: its size, and
  // with its sign (negative: the value fell).
  double change() const;
  double signedChange() const;

 private:
  double threshold_, smoothing_;
  int64_t warmup_;
  double reference_ = 0, smoothed_ = 0;
  int64_t seen_ = 0;
};

}  // namespace gradzip::trainer
