// Implements controller/Controller.h's decision (Controller::decide): refit →
// shortlist → explore → knee → adopt (flexible-communication paper §3-E;
// DIGEST.md §5). Each step's own file is named in controller/ControllerDecision.h.
#include "controller/Controller.h"

#include "controller/ControllerDecision.h"
#include "controller/ControllerDetail.h"
#include "controller/DecisionLog.h"
#include "controller/LinkEstimator.h"
#include "controller/RecentSteps.h"
#include "controller/Triggers.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h, controller/ControllerDecision.h

size_t Controller::indexOf(const Plan& plan) const {
  return size_t(std::find_if(candidates_.begin(), candidates_.end(), [&](const Candidate& c) { return c.plan == plan; }) -
                candidates_.begin());
}

// refit → screen → explore → knee → broadcast (flexible-communication paper
// §3-E; DIGEST.md §5).
void Controller::decide(int64_t step, const std::string& reason, ControlledLoop& loop) {
  Decision d;
  d.step = step;
  d.reason = reason;
  d.rec = {{"step", step}, {"event", "decision"}, {"trigger", reason}, {"world_size", comm_.size()}};
  d.networkTrigger = reason == "network" || reason == "step_time" || reason == "sounding";
  d.floor.assign(candidates_.size(), 0.0);
  if (link_->betaPending()) link_->settleBeta(step, observedSteps_);
  // Where no sync overlaps backward, forward+backward does not depend on the
  // plan: measured plans are compared by their step − compute on one base,
  // the mean forward+backward of the running plan's steps since the last
  // decision (the predictions' base too), not by steps that each carry the
  // host's load of their own few steps.
  if (opts_.commonBase && !sync_.overlapsBackward() && !recent_->empty()) d.base = meanCompute(recent_->steps());
  if (d.base > 0) d.rec["common_base"] = d.base;
  // Exploration leaves the triggers' steps alone.
  if (triggers_->hasSteps()) d.currentStep = comparedTime(d.base, triggers_->latestStep(), triggers_->latestSync());
  const bool weighted = std::any_of(large_.begin(), large_.end(), [&](int k) { return !sync_.statWeights(k).empty(); });
  d.rec["geometry"] = weighted ? "optimizer" : "gradient";  // rank 0's, the one that screens and decides
  // The soundings of a refit are sized for sound_every of the running plan's steps.
  const double window =
      recent_->empty() ? 0.0 : double(opts_.soundEvery) * recent_->stepSeconds() / double(recent_->size());

  const auto refit = link_->refit(d.networkTrigger, window, triggers_->betaSteps(), d.rec);
  d.bySoundings = refit.bySoundings;
  d.networkChanged = refit.changed;
  d.rec["refit_seconds"] = since(d.started);  // β's settling included
  if (comm_.rank() == 0) shortlist(d);
  shareShortlist(d);
  exploreShortlist(d, loop);
  if (comm_.rank() == 0) chooseKnee(d);
  adopt(d);

  triggers_->decisionTaken();
  lastDecision_ = step;
  ++decisions_;
  d.rec["seconds"] = since(d.started);  // all of it: refit, screening, exploration (charged to training time)
  log_->write(d.rec);
  spdlog::info("controller: step {} ({} trigger): {} {} after exploring {} plans in {:.1f} s", step, reason,
               opts_.pin ? "would pick" : "picked", d.rec["chosen"].get<std::string>(), d.exploreList.size(),
               d.rec["explore_seconds"].get<double>());
}

void Controller::shareShortlist(Decision& d) {
  // [count, the predicted knee or -1, the candidates].
  auto list = torch::full({opts_.explore + 2}, int64_t(-1), torch::kLong);
  list[0] = int64_t(d.exploreList.size());
  list[1] = d.predictedKnee;
  for (size_t i = 0; i < d.exploreList.size(); ++i) list[i + 2] = d.exploreList[i];
  comm_.broadcast(list, 0).wait();
  d.exploreList.clear();
  d.predictedKnee = list[1].item<int64_t>();
  for (int64_t i = 0; i < list[0].item<int64_t>(); ++i) d.exploreList.push_back(list[i + 2].item<int64_t>());
}

void Controller::chooseKnee(Decision& d) {
  // The knee of the measured points (the running plan from its recent
  // steps) and, at a network decision, the predicted knee's point.
  auto cj = statsJson(recent_->stats());
  d.rec["current"] = {{"plan", active_.key()},
                    {"measured_step", triggers_->hasSteps() ? triggers_->latestStep() : INFINITY},
                    {"measured_sync", triggers_->hasSteps() ? triggers_->latestSync() : INFINITY},
                    {"time", d.currentStep},
                    {"vnmse", cj["vnmse"]},
                    {"gain", cj["gain"]}, {"steps", recent_->size()}, {"steps_on_plan", planSteps_},
                    {"cost", statCost(opts_, recent_->stats(), active_, d.activeFloor)}};
  std::vector<Objectives> pts;
  auto& ex = d.rec["explored"] = nlohmann::json::array();
  for (size_t i = 0; i < d.exploreList.size(); ++i) {
    const auto& m = d.measured[i];
    const size_t c = size_t(d.exploreList[i]);
    pts.push_back(m.ok ? Objectives{m.time, statCost(opts_, m.stats, candidates_[c].plan, d.floor[c])}
                       : Objectives{INFINITY, INFINITY});
    auto j = statsJson(m.stats);
    ex.push_back({{"plan", candidates_[d.exploreList[i]].plan.key()},
                  {"ok", m.ok},
                  {"measured_step", m.step},
                  {"measured_sync", m.sync},
                  {"time", m.time},
                  {"fastest_step", m.fastest},
                  {"steps", m.steps},
                  {"stopped_early", m.stopped},
                  {"predicted_step", d.screened[d.exploreList[i]].predicted},
                  {"vnmse", j["vnmse"]},
                  {"gain", j["gain"]}});
  }
  // The running plan's step time now: the median of its latest steps (its
  // mean since the last decision would hide a network that just changed),
  // unless they straddle a network change.
  const size_t own = pts.size(), knee = own + 1;
  pts.push_back(std::isfinite(d.currentStep) && !d.stale
                    ? Objectives{d.currentStep, statCost(opts_, recent_->stats(), active_, d.activeFloor)}
                    : Objectives{INFINITY, INFINITY});
  pts.push_back(d.predictedKnee >= 0 ? d.kneePredicted : Objectives{INFINITY, INFINITY});
  if (!paretoFront(pts).empty()) {
    const size_t k = opts_.kneeOf(pts);
    followup_ = {};
    // The prediction's split (Screening::all): base + exposed sync.
    const auto split = [&](const Screened& s) {
      followup_.predicted = s.predicted;
      followup_.predictedExposed = s.exposed;
      followup_.predictedBase = s.predicted - s.exposed;
    };
    if (k < own) {
      d.chosen = d.exploreList[k];
      split(d.screened[size_t(d.chosen)]);
      d.syncRef = d.measured[k].sync;
    } else if (k == own) {
      followup_.predicted = d.currentStep;
      d.syncRef = triggers_->latestSync();
    } else if (k == knee) {
      // The predicted knee: its prediction is its reference, and its
      // step − compute as the steps will show it (syncs_) the predicted
      // step less the compute of the steps its base came from (baseStep).
      // Not the exposed sync alone: that leaves out the step's other
      // non-compute time (optimizer, data), and biased the step-time
      // trigger's dSync by it.
      d.chosen = d.predictedKnee;
      const auto& s = d.screened[size_t(d.chosen)];
      split(s);
      d.syncRef = std::max(0.0, s.predicted - meanCompute(recent_->steps()));
    }
    d.stepRef = pts[k].time;
    d.measuredRefs = k <= own;
    if (opts_.pin) {
      // Pinned, the pin runs on whatever the knee: the references are its
      // own latest steps (on the common base), and no follow-up compares another plan's
      // prediction with them.
      d.stepRef = d.currentStep;
      d.syncRef = triggers_->hasSteps() ? triggers_->latestSync() : 0.0;
      d.measuredRefs = true;
    } else {
      followup_.step = d.step;
      followup_.explored = d.stepRef;
    }
    d.rec["references"] = {{"step", d.stepRef}, {"sync", d.syncRef}, {"measured", d.measuredRefs}};
  }
}

void Controller::adopt(Decision& d) {
  d.chosen = broadcastInt(comm_, d.chosen);
  const Plan pick = d.chosen >= 0 ? candidates_[d.chosen].plan : active_;
  d.rec["chosen"] = pick.key();
  d.rec["pinned"] = bool(opts_.pin);
  if (d.chosen >= 0 && !opts_.pin) {
    applyPlan(pick, d.step);
  } else {
    // Same plan (or pinned): keep measuring it, with fresh references.
    resetMeasurements();
  }
  triggers_->adoptReferences(d.stepRef, d.syncRef, d.measuredRefs);  // rank 0 alone evaluates the triggers
  if (d.networkTrigger) {
    d.networkChanged = broadcastInt(comm_, d.networkChanged ? 1 : 0) != 0;
    d.rec["network_backoff"] = triggers_->networkJudged(d.networkChanged);
  }
}

}  // namespace gradzip::trainer
