// Fits α and β from timings observed during training (collectives reported by
// CommStats or GradSync), so the controller notices when the network changes
// without stopping to probe (DESIGN.md, Controller inputs: "α and β, probed and
// also fitted from observed collective times"; the flexible-communication
// paper re-solves its MOO when latency or bandwidth moves beyond a threshold).
//
// Each observation says how many latency terms and how many β-charged bytes
// the operation costs (AlphaBetaSample: 1 and M for a point-to-point message;
// 2(N−1) and 2(N−1)/N·M for a ring all-reduce, paper Table I). Robustness, in
// two layers: observations with identical coefficients (the same bucket through
// the same collective, which is what training produces) are reduced to their
// median; the group medians are then fitted by iteratively reweighted least
// squares on relative residuals with Tukey's bisquare weights (scale from the
// median absolute residual), which rejects the odd slow step (GC pause,
// straggler, page fault) even where every size is seen once.
#pragma once

#include "comm/AlphaBetaFit.h"

#include <cstddef>
#include <deque>
#include <optional>

namespace gradzip::comm {

struct LinkFitterOptions {
  // Only the most recent `window` observations are kept, so a fit follows a
  // changing network.
  size_t window = 512;
  int irlsIterations = 10;
  // Bisquare tuning constant in units of the robust residual scale (4.685
  // gives 95% efficiency for Gaussian noise).
  double bisquareC = 4.685;
};

class LinkFitter {
 public:
  explicit LinkFitter(LinkFitterOptions opts = {});

  // Records one observation; seconds must be positive and finite (others are
  // ignored), betaBytes >= 0, alphaCount >= 0.
  void add(const AlphaBetaSample& s);
  // One point-to-point message of `bytes` that took `seconds`.
  void addPointToPoint(double bytes, double seconds) { add({1.0, bytes, seconds}); }
  size_t size() const { return samples_.size(); }
  void clear() { samples_.clear(); }

  // The robust fit of the samples in the window, or nullopt while α and β are
  // not yet identifiable (fewer than two distinct coefficient pairs).
  std::optional<NetworkParams> fit() const;

  // True when the current fit's β differs from reference.beta by more than
  // relThreshold relatively: |β/β_ref − 1| > relThreshold. False while there
  // is no fit. reference.beta must be positive.
  bool betaChanged(const NetworkParams& reference, double relThreshold) const;
  static bool betaChanged(const NetworkParams& reference, const NetworkParams& current, double relThreshold);

 private:
  LinkFitterOptions opts_;
  std::deque<AlphaBetaSample> samples_;
};

}  // namespace gradzip::comm
