// The working state of one controller decision, shared by the files that
// implement its steps (shortlist: ControllerShortlist.cpp; exploration:
// ControllerExplore.cpp; decide, knee and adoption: ControllerDecision.cpp;
// the refit is LinkEstimator::refit), and the step-time helpers they share.
// Private to the controller: nothing outside controller/Controller*.cpp includes it.
#pragma once

#include "controller/Controller.h"
#include "controller/Pareto.h"
#include "controller/Screening.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>
#include <string>
#include <vector>

namespace gradzip::trainer {
namespace detail {
// The steps' mean forward+backward time.
inline double meanCompute(std::span<const StepMeasure> steps) {
  double compute = 0;
  for (const auto& m : steps) compute += m.compute;
  return compute / double(std::max<size_t>(1, steps.size()));
}

// The step time a plan's exposed sync adds to (the predictions' base): the
// measured steps minus the time the training thread waited for the running
// plan's sync after backward, but at least their forward+backward time,
// averaged.
inline double baseStep(std::span<const StepMeasure> steps) {
  double base = 0;
  for (const auto& m : steps) base += m.step - m.exposed;
  return std::max(base / double(std::max<size_t>(1, steps.size())), meanCompute(steps));
}

// The step time a decision compares a measured plan by (common_base): its
// step as measured, or on the decision's common base (> 0) that base plus
// the plan's step − compute.
inline double comparedTime(double base, double step, double sync) { return base > 0 ? base + sync : step; }
}  // namespace detail

// One decision's working state, passed through its steps (decide).
struct Controller::Decision {
  int64_t step = 0;
  std::string reason;
  nlohmann::json rec;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool networkTrigger = false;  // network, step_time or sounding
  bool networkChanged = false;  // the refit moved β by more than network_drift
  bool bySoundings = false;     // β from the bandwidth soundings (the running plan is latency-bound)
  // The measured plans' common base (ControllerOptions::commonBase), 0 where
  // each plan keeps its own steps; the running plan's step as compared.
  double base = 0, currentStep = INFINITY;
  // The shortlist (rank 0 screens; every rank gets exploreList and
  // predictedKnee): the candidates to explore in knee order; the running
  // plan as measured (infinite when it is re-measured); each candidate's
  // screened cost, below which a few explored steps do not bring it
  // (`floor`), the running plan's; a network decision's predicted knee,
  // standing for itself with its predicted point; whether the running
  // plan's recent steps straddle a network change.
  std::vector<int64_t> exploreList;
  std::vector<Screened> screened;
  Objectives current{INFINITY, INFINITY};
  std::vector<double> floor;
  double activeFloor = 0;
  int64_t predictedKnee = -1;
  Objectives kneePredicted{INFINITY, INFINITY};
  bool stale = false;
  std::vector<Measured> measured;  // exploreList's, in order
  // The choice (rank 0, then broadcast): -2 keeps the running plan; the
  // chosen plan's step and step − compute references, measured or predicted.
  int64_t chosen = -2;
  double stepRef = 0, syncRef = 0;
  bool measuredRefs = false;
};

}  // namespace gradzip::trainer
