// Helpers shared by the two halves of the controller (trainer/Controller.cpp,
// trainer/ControllerDecision.cpp): wall-clock timing, the β estimate from
// observed collectives, and the statistics record of the
// decision log. Internal to trainer/.
#pragma once

#include "trainer/GradSync.h"
#include "util/Median.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace gradzip::trainer::detail {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Single collective times on a shared host have heavy tails, and on a fast
// link they are mostly scheduling noise: the network detector and the β
// correction take the median of the last kRatioWindow observations.
constexpr size_t kRatioWindow = 9;

// β per observation (t − a·α)/m with the plan's coefficients (Table I), from
// the observations that took well over their latency term (an α-bound
// all-gather of a few hundred bytes would turn its latency noise into a bogus
// bandwidth), and their median; +infinity with fewer than half a window.
template <typename Samples>
double observedBeta(const Samples& samples, double alpha) {
  std::vector<double> betas;
  for (const auto& o : samples)
    if (o.betaBytes > 0 && o.seconds >= 2 * o.alphaCount * alpha)
      betas.push_back(std::max(0.0, o.seconds - o.alphaCount * alpha) / o.betaBytes);
  return betas.size() < kRatioWindow / 2 + 1 ? INFINITY : median(betas);
}

// vNMSE = ||x − y||² / ||x||² and gain = ||y||² / ||x||² (paper's E||g_c||² / E||g_e||²).
inline nlohmann::json statsJson(const CompressionStats& s) {
  const double in = s.inputSq > 0 ? s.inputSq : NAN;
  return {{"vnmse", s.errorSq / in}, {"gain", s.appliedSq / in}};
}

}  // namespace gradzip::trainer::detail
