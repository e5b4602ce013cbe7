// Implements the controller's shortlist (controller/Controller.h): a
// decision's screening (controller/Screening.h) turned into the candidates
// to explore near the knee of the predicted front, in knee order, and at a
// network decision the predicted knee that stands for itself.
#include "controller/Controller.h"

#include "controller/ControllerDecision.h"
#include "controller/ControllerDetail.h"
#include "controller/LinkEstimator.h"
#include "controller/RecentSteps.h"
#include "controller/Screening.h"
#include "controller/Triggers.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h, controller/ControllerDecision.h

void Controller::shortlist(Decision& d) {
  // gain_scope: family keeps a gain decision to the running compressor's
  // own grid: only that grid is screened, the rest left at infinity.
  const bool familyOnly = d.reason == "gain" && opts_.gainScope == "family";
  const auto pts = screening_->decision(d.step, triggers_->phase() != Phase::Decided, d.networkTrigger,
                                        familyOnly ? active_.compressor : std::string(), baseStep(recent_->steps()),
                                        recent_->timings(), link_->network(), d.screened, d.rec);
  for (size_t i = 0; i < pts.size(); ++i) d.floor[i] = std::isfinite(pts[i].stat) ? pts[i].stat : 0.0;
  // The running plan among the candidates (candidates_.size() if not: pinned to another plan).
  const size_t self = indexOf(active_);
  // A plan that has run min_interval steps (the horizon over which its
  // statistics stand without a gain decision) has built its residual up:
  // what it measured since the last decision is its steady state, and the
  // replays of one gradient overstate that of the denser sparsifiers
  // (controller_ablation.md, "The running plan's settled cost").
  const bool settled = planSteps_ >= opts_.minInterval;
  if (self < candidates_.size() && !settled) d.activeFloor = d.floor[self];
  d.rec["current_settled"] = settled;
  // A gain-triggered decision follows the gain (Pareto.h followGain): after
  // a fall only plans that compress less than the running one are
  // explored, after a rise only plans that compress more. Without it the
  // knee of the running plan's error-feedback steady state and its sparser
  // neighbours, explored for a few steps, stepped to ever sparser TopK as
  // the gain fell (controller_ablation.md, "Gain decisions follow the
  // gain"). Network-triggered decisions may move either way.
  auto remaining = pts;
  if (d.reason == "gain") {
    const double own = self < candidates_.size() ? pts[self].stat : NAN;
    const double change = triggers_->gainChange();
    remaining = followGain(pts, own, change);  // within the family under gain_scope: family (Screening::decision)
    d.rec["direction"] = {{"gain_change", change},
                        {"scope", opts_.gainScope},
                        {"screened_cost", own},
                        {"towards", !std::isfinite(own) ? "either way (the running plan was not screened)"
                                    : change < 0        ? "less compression"
                                                        : "more compression"}};
  }
  // The knee first, then the knee of what is left, and so on.
  // After a network change the running plan's own recent steps straddle
  // the change and do not measure it (below); otherwise they do.
  // Unless the soundings just measured the link unchanged (the detector's
  // alarm was noise): then the running plan's recent steps still hold.
  const bool remeasure = d.networkTrigger && !(d.bySoundings && !d.networkChanged);
  d.stale = remeasure;
  if (d.networkTrigger && !remeasure) d.rec["remeasure"] = "no: the soundings found the link unchanged";
  // Otherwise a candidate is worth exploring only if, predicted
  // explore_margin slower, it would still replace the running plan as
  // measured: where communication is a few % of the step nothing can.
  if (!remeasure && triggers_->hasSteps())
    d.current = {d.currentStep, statCost(opts_, recent_->stats(), active_, d.activeFloor)};
  // At a network decision the bar is the knee of the predicted front at the
  // new α and β instead, the cost model standing in for the running plan's
  // steps that straddle the change, with the model's error on the
  // challengers' side (the knee explore_margin slower): the running plan
  // stays, nothing explored, if it could replace the knee so; otherwise
  // only the candidates that could replace it so are explored, racing the
  // knee's predicted point, and the knee, not explored, stands for itself
  // with that point (adopted outright if none can challenge it): exploring
  // the running plan again there costs seconds, and the knee's prediction is
  // close to its explored step (controller_ablation.md, "Screening the
  // steady state, and network decisions that trust the model").
  Objectives bar = d.current;
  double barMargin = opts_.exploreMargin;  // on the candidate's predicted time
  if (remeasure && !paretoFront(remaining).empty()) {
    const size_t knee = opts_.kneeOf(remaining);
    bar = {remaining[knee].time * (1 + opts_.exploreMargin), remaining[knee].stat};
    barMargin = 0;
    if (self < candidates_.size() && std::isfinite(pts[self].time) &&
        (self == knee || couldReplace(bar, pts[self], 0.0, opts_.timeWeight, opts_.kneeScale()))) {
      d.rec["kept"] = "the running plan is predicted within explore_margin of the knee at the new network";
      d.stale = false;  // its recent steps, the best measure there is, stand for it
      remaining.assign(remaining.size(), Objectives{INFINITY, INFINITY});
    } else {
      d.predictedKnee = int64_t(knee);
      d.kneePredicted = remaining[knee];
      d.rec["predicted_knee"] = {{"plan", candidates_[knee].plan.key()},
                               {"predicted_step", d.kneePredicted.time},
                               {"statistical_cost", d.kneePredicted.stat}};
    }
  }
  // One candidate per compressor configuration: its collectives share the
  // statistics, and the screening's best-placed one stands for them, so
  // the explored steps go to different compressors.
  auto& skipped = d.rec["not_explored"] = nlohmann::json::array();
  // The predicted knee counts as one of the `explore` candidates nearest
  // the knee, measured by its prediction.
  std::vector<std::string> compressors;
  int64_t budget = opts_.explore;
  if (d.predictedKnee >= 0) {
    remaining[size_t(d.predictedKnee)] = {INFINITY, INFINITY};
    compressors.push_back(candidates_[size_t(d.predictedKnee)].plan.codecKey());
    --budget;
  }
  while (int64_t(d.exploreList.size()) < budget && !paretoFront(remaining).empty()) {
    const size_t i = opts_.kneeOf(remaining);
    remaining[i] = {INFINITY, INFINITY};
    if (candidates_[i].plan == active_) continue;
    const std::string compressor = candidates_[i].plan.codecKey();
    if (std::find(compressors.begin(), compressors.end(), compressor) != compressors.end()) continue;
    if (!couldReplace(bar, pts[i], barMargin, opts_.timeWeight, opts_.kneeScale())) {
      skipped.push_back(candidates_[i].plan.key());
      continue;
    }
    d.exploreList.push_back(int64_t(i));
    compressors.push_back(compressor);
  }
  if (d.predictedKnee >= 0 && d.exploreList.empty())
    d.rec["adopted"] = "the predicted knee: no other candidate could replace it within explore_margin";
}

}  // namespace gradzip::trainer
