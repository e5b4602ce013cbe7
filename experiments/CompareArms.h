// An arm's repeats pooled for the TTA summary (experiments/CompareSummary.h):
// the runs that logged rows, the mean and range of a figure over them, the
// time to a target, the step time with its pooled spread, and the window in
// which the runs first reached a target. Private to CompareSummary's files
// (CompareSummary.cpp, CompareNoise.cpp).
#pragma once

#include "experiments/CompareSummary.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

namespace gradzip::experiments::detail {

// Mean and range of the values that exist, out of n runs.
struct Spread {
  int reached = 0, n = 0;
  double mean = NAN, min = NAN, max = NAN;
  bool all() const { return n > 0 && reached == n; }
};

inline Spread spreadOf(const std::vector<std::optional<double>>& v) {
  Spread s;
  s.n = static_cast<int>(v.size());
  double sum = 0;
  for (const auto& x : v) {
    if (!x) continue;
    s.min = s.reached ? std::min(s.min, *x) : *x;
    s.max = s.reached ? std::max(s.max, *x) : *x;
    sum += *x;
    ++s.reached;
  }
  if (s.reached) s.mean = sum / s.reached;
  return s;
}

inline std::vector<const RunStats*> okRuns(const ArmStats& a) {
  std::vector<const RunStats*> out;
  for (const auto& r : a.runs)
    if (r.ok) out.push_back(&r);
  return out;
}

template <class F>
Spread over(const ArmStats& a, F f) {
  std::vector<std::optional<double>> v;
  for (const auto* r : okRuns(a)) v.push_back(f(*r));
  return spreadOf(v);
}

inline Spread ttaSpread(const ArmStats& a, size_t i) {
  return over(a, [i](const RunStats& r) { return r.timeToTarget[i]; });
}

// The arm's mean step time and its spread, pooled over repeats: the square
// root of the mean over runs of (run spread² + (run mean − mean)²).
inline std::pair<double, double> stepTimeAndSpread(const ArmStats& a) {
  const auto runs = okRuns(a);
  if (runs.empty()) return {NAN, NAN};
  double mean = 0, var = 0;
  for (const auto* r : runs) mean += r->step / static_cast<double>(runs.size());
  for (const auto* r : runs)
    var += (r->stepSd * r->stepSd + (r->step - mean) * (r->step - mean)) / static_cast<double>(runs.size());
  return {mean, std::sqrt(var)};
}

// [earliest window start, latest crossing] over the arm's runs at target i;
// every run reached it.
inline std::pair<double, double> crossingWindow(const ArmStats& a, size_t i) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto* r : okRuns(a)) {
    lo = std::min(lo, r->targetWindowStart[i].value_or(0.0));
    hi = std::max(hi, *r->timeToTarget[i]);
  }
  return {lo, hi};
}

}  // namespace gradzip::experiments::detail
