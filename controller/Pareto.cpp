// Implements controller/Pareto.h.
#include "controller/Pareto.h"

#include "util/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gradzip::trainer {
namespace {
bool finite(const Objectives& o) { return std::isfinite(o.time) && std::isfinite(o.stat); }
bool dominates(const Objectives& a, const Objectives& b) {
  return a.time <= b.time && a.stat <= b.stat && (a.time < b.time || a.stat < b.stat);
}
}  // namespace

std::vector<size_t> paretoFront(const std::vector<Objectives>& points) {
  std::vector<size_t> front;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!finite(points[i])) continue;
    bool dominated = false;
    for (size_t j = 0; j < points.size() && !dominated; ++j)
      dominated = j != i && finite(points[j]) && dominates(points[j], points[i]);
    if (!dominated) front.push_back(i);
  }
  return front;
}

size_t kneePoint(const std::vector<Objectives>& points, double timeWeight, KneeScale scale, double timeTolerance) {
  GZ_CHECK(timeWeight >= 0 && timeWeight <= 1, "knee: time weight {} is outside [0, 1]", timeWeight);
  GZ_CHECK(timeTolerance >= 0 && std::isfinite(timeTolerance), "knee: time tolerance must be >= 0, got {}",
           timeTolerance);
  const auto front = paretoFront(points);
  GZ_CHECK(!front.empty(), "knee: no candidate has finite predicted time and statistical cost");
  double tMin = INFINITY, tMax = -INFINITY, sMin = INFINITY, sMax = -INFINITY;
  for (size_t i : front) {
    tMin = std::min(tMin, points[i].time);
    tMax = std::max(tMax, points[i].time);
    sMin = std::min(sMin, points[i].stat);
    sMax = std::max(sMax, points[i].stat);
  }
  auto norm = [](double v, double lo, double hi) { return hi > lo ? (v - lo) / (hi - lo) : 0.0; };
  if (scale != KneeScale::MinMax)
    GZ_CHECK(tMin > 0, "knee: relative and log scaling need positive times, got {}", tMin);
  if (scale == KneeScale::Log)
    GZ_CHECK(sMin > -1, "knee: log scaling needs statistical costs above -1, got {}", sMin);
  // ε-dominance on time (Pareto.h): i is out when some j costs clearly less
  // and is at most (1 + ε) times slower.
  auto toleratedOut = [&](size_t i) {
    if (timeTolerance == 0) return false;
    const double cheaper = points[i].stat - kFollowGainMargin * std::abs(points[i].stat);
    for (size_t j : front)
      if (points[j].stat < cheaper && points[j].time <= points[i].time * (1 + timeTolerance)) return true;
    return false;
  };
  size_t best = front.front();
  double bestDist = INFINITY;
  for (size_t i : front) {
    if (toleratedOut(i)) continue;
    double d = 0;
    if (scale == KneeScale::Log) {  // weighted L1 of the log ratios (Pareto.h)
      d = timeWeight * std::log(points[i].time / tMin) +
          (1 - timeWeight) * std::log((1 + points[i].stat) / (1 + sMin));
    } else {
      const bool rel = scale == KneeScale::Relative;
      const double t = rel ? (points[i].time - tMin) / tMin : norm(points[i].time, tMin, tMax);
      const double s = rel ? points[i].stat - sMin : norm(points[i].stat, sMin, sMax);
      d = std::sqrt(timeWeight * t * t + (1 - timeWeight) * s * s);
    }
    const bool better = d < bestDist || (d == bestDist && points[i].time < points[best].time);
    if (better) {
      best = i;
      bestDist = d;
    }
  }
  return best;
}

bool couldReplace(const Objectives& current, const Objectives& candidate, double margin, double timeWeight,
                  KneeScale scale) {
  GZ_CHECK(margin >= 0, "knee: margin must be >= 0, got {}", margin);
  const Objectives pessimistic{candidate.time * (1 + margin), candidate.stat};
  if (!finite(pessimistic)) return false;
  if (!finite(current)) return true;  // nothing measured to compare against
  // A tie in distance goes to the faster of the two (kneePoint), and at equal
  // times to index 0, the running plan.
  return kneePoint({current, pessimistic}, timeWeight, scale) == 1;
}

std::vector<Objectives> followGain(std::vector<Objectives> points, double own, double gainChange) {
  if (!std::isfinite(own) || gainChange == 0 || !std::isfinite(gainChange)) return points;
  const double margin = kFollowGainMargin * std::abs(own);
  for (auto& p : points)
    if (gainChange < 0 ? !(p.stat < own - margin) : !(p.stat > own + margin)) p = {INFINITY, INFINITY};
  return points;
}

}  // namespace gradzip::trainer
