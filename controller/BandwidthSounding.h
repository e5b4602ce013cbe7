// Bandwidth soundings: the controller's view of the link while the running
// plan's own collectives cannot give one. A latency-bound plan (a sparse TopK
// sends a few KB a step) fits inside a token-bucket shaper's burst and takes
// about the same time on a slow link as on an unshaped one, so after
// the link recovers nothing the controller observes changes and it keeps the
// sparse plan (experiments/results/schedule_c1.md). A sounding is one timed
// all-reduce of a float32 buffer of the same size all through a plan (at
// least 64 KB: past a token bucket's burst). The first sounding after a
// decision is the reference; one whose time differs from it by more than a
// factor (1 + threshold) and by more than kNoiseSeconds (on a fast link a
// 64 KB sounding is mostly latency and scheduling noise) is suspect, and a
// second one in a row, the same way, is a
// change of the link. A decision taken while the link was changing can leave
// its reference on the new link, and the soundings after it then agree with
// it: so the reference is also held against the time the decision's own α
// and β predict for it, and one much faster than predicted (beyond the same
// factor and kNoiseSeconds) is suspect at once. Only faster: a plan chosen for a
// faster link than there is still moves its bytes through its own
// collectives, which the ratio detector watches. β from a sounding is the ring all-reduce cost solved
// for β (flexible-communication paper Table I: t = 2(N−1)α + 2(N−1)/N·M·β).
// This class holds that logic; the controller runs the collectives
// (controller/LinkEstimator.h).
#pragma once

#include <cstdint>

namespace gradzip::trainer {

class BandwidthSounding {
 public:
  // Sounding sizes: at least 64 KB, over a token bucket's burst (comm/NetEmulator:
  // 1 ms of line rate, 62.5 KB at 500 Mbit/s), at most 4 MB.
  static constexpr int64_t kMinBytes = int64_t(64) << 10;
  static constexpr int64_t kMaxBytes = int64_t(4) << 20;
  static constexpr double kNoiseSeconds = 1e-3;

  // threshold > 0: a relative change of the sounding time that counts (the
  // controller's network_drift doubled, as for its mismatch rule).
  explicit BandwidthSounding(double threshold);

  // The size of a sounding that takes `share` of `seconds` at 1/beta bytes per
  // second, clamped to [kMinBytes, kMaxBytes] and rounded up to a multiple of
  // 4·n (whole float32 elements, split evenly over n ranks).
  static int64_t bytesFor(double share, double seconds, double beta, int n);
  // The periodic soundings' size: kMinBytes rounded up to a multiple of 4·n.
  static int64_t periodicBytes(int n) { return bytesFor(0.0, 0.0, 0.0, n); }
  // β from one all-reduce of `bytes` on n >= 2 ranks that took `seconds`:
  // (t − 2(N−1)α) / (2(N−1)/N·M), at least 1e-3 of t/M (latency noise must not
  // make it zero or negative). With α = 0: t/(2(N−1)/N·M), the effective β
  // latency included (an upper bound on β).
  static double betaOf(double seconds, int64_t bytes, int n, double alpha);

  enum class Verdict { Reference, Steady, Suspect, Changed };
  // After a decision: the next sounding becomes the reference, unless it
  // takes less than `expected` / (1 + threshold) − kNoiseSeconds (the time
  // the decision's network model predicts for a sounding; 0: none), when
  // `expected` becomes the reference and the sounding is suspect.
  void reset(double expected = 0);
  // One sounding's time (non-finite or non-positive: ignored, the last
  // verdict again).
  Verdict add(double seconds);
  // The latest sounding's time over the reference's (1 before any).
  double change() const;
  double latest() const { return latest_; }
  // change() if the latest sounding confirmed a change (Changed), else 1.
  double confirmedChange() const { return last_ == Verdict::Changed ? change() : 1.0; }
  bool hasReference() const { return reference_ > 0; }

 private:
  Verdict classify(double seconds);

  double threshold_;
  double reference_ = 0, latest_ = 0;
  double expected_ = 0;  // the model's time for the first sounding after reset()
  Verdict last_ = Verdict::Steady;
  int suspect_ = 0;  // the direction of the last sounding beyond the threshold (+1 slower, −1 faster), or 0
};

}  // namespace gradzip::trainer
