// Implements the controller's exploration (controller/Controller.h): a plan
// trained for explore_steps real steps from an in-memory snapshot that is
// restored afterwards (a race: a losing candidate stops early), a decision's
// shortlist explored so, and the provisional plan of the warm-up (the knee of
// the predicted front, with the rewind to the state begin() kept).
#include "controller/Controller.h"

#include "controller/ControllerDecision.h"
#include "controller/ControllerDetail.h"
#include "controller/DecisionLog.h"
#include "controller/LinkEstimator.h"
#include "controller/PlanCost.h"
#include "controller/RecentSteps.h"
#include "controller/Screening.h"
#include "controller/Triggers.h"
#include "sync/NonFiniteGradient.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h, controller/ControllerDecision.h

double Controller::provisional(int64_t step, const StepMeasure& m, ControlledLoop& loop, double spent) {
  const auto t0 = Clock::now();
  triggers_->provisionalTaken();
  nlohmann::json rec{{"step", step}, {"event", "provisional"}, {"world_size", comm_.size()}, {"measured_on", active_.key()}};
  int64_t chosen = -1;
  // What afterStep's startProvisional finished while β was measured.
  if (const auto ahead = screening_->screenedAhead()) rec["screened_during_beta"] = *ahead;
  if (link_->betaPending()) link_->settleBeta(step, observedSteps_);
  if (comm_.rank() == 0) {
    // The base from this step alone: the steps before it carry start-up costs.
    std::vector<Screened> screened;
    OverlapTimings timing;  // this step's alone, as the base
    recent_->addTimings(sync_, timing);
    const auto pts = screening_->provisional(baseStep({&m, 1}), timing, link_->network(), screened, rec);
    if (!paretoFront(pts).empty()) {
      chosen = int64_t(opts_.kneeOf(pts));
      // `initial` stays unless the knee, predicted explore_margin slower,
      // would still replace it as predicted: a saving within the model's
      // error is no reason to compress. (After a
      // sparse start `initial` is not what the steps ran: kept, it is
      // restarted from the rewind like any other choice.)
      const size_t self = indexOf(opts_.initial);
      if (self < candidates_.size() && size_t(chosen) != self &&
          !couldReplace(pts[self], pts[size_t(chosen)], opts_.exploreMargin, opts_.timeWeight, opts_.kneeScale())) {
        rec["kept"] = fmt::format("{} is predicted within explore_margin ({}) of the knee {}", opts_.initial.key(),
                                  opts_.exploreMargin, candidates_[size_t(chosen)].plan.key());
        chosen = int64_t(self);
      }
      rec["predicted_step"] = screened[size_t(chosen)].predicted;
    }
  }
  chosen = broadcastInt(comm_, chosen);
  const bool moves = chosen >= 0 && !(candidates_[size_t(chosen)].plan == active_);
  const bool rewind = moves && !rewindState_.empty();
  const int64_t from = rewind ? rewindStep_ : step;
  if (rewind) log_->undone(from, active_.key(), step - from, "provisional_rewind");
  if (moves) applyPlan(candidates_[size_t(chosen)].plan, from);
  if (rewind) {
    // The steps so far measured; undone, they leave no trace of what they
    // ran in the model, the optimizer, the data position or the compressor
    // states: those their plan made (the sparse start's error-feedback
    // residual) are dropped, and restoring builds the chosen plan's afresh,
    // as a run on it from the start would (ControlledLoop::restore). Every
    // rank kept its state at the same step (begin), so all rewind together.
    loop.restore(rewindState_);
    rec["rewound"] = {{"to_step", from}, {"steps", step - from}};
    refreshGeometry();  // measured in the restored optimizer's geometry
    geometryRefreshed_ = false;  // and again after its first step
  }
  rewindState_.clear();
  rewindState_.shrink_to_fit();
  const double seconds = since(t0);
  rec["chosen"] = active_.key();
  rec["seconds"] = seconds;
  // With a rewind the restored clock predates the undone steps (and `spent`):
  // every second since the state was kept is charged here.
  const double charged = from < step ? since(rewindSince_) : spent + seconds;
  if (from < step) rec["charged_seconds"] = charged;
  log_->write(rec);
  spdlog::info("controller: step {} (provisional, until the first decision at step {}): {} from the predicted front{}",
               step, opts_.warmupSteps, active_.key(),
               from < step ? fmt::format("; the {} steps before it undone, training restarts at step {}", step - from, from)
                           : "");
  return charged;
}

Controller::Measured Controller::explore(int64_t step, const Plan& plan, ControlledLoop& loop, bool race,
                                        const Objectives& against, double statFloor, double base) {
  Measured out;
  const Plan before = active_;
  for (int k : large_) sync_.setPlan(k, plan);
  std::vector<double> steps, syncs;
  int64_t ran = 0;  // steps trained, the untimed first included
  try {
    for (int64_t i = 0; i < opts_.exploreSteps; ++i) {
      const auto m = loop.exploreStep();
      ++ran;
      if (i == 0) continue;  // builds the compressor and its caches
      steps.push_back(m.step);
      syncs.push_back(std::max(0.0, m.step - m.compute));
      for (int k : large_) out.stats += sync_.lastWeightedStats(k);
      // The race (explore_min_steps): rank 0 stops a candidate that, on its
      // fastest step so far (a loaded host only ever slows a step down) and
      // its statistics so far, would not replace the running plan.
      if (race && int64_t(steps.size()) >= opts_.exploreMinSteps && i + 1 < opts_.exploreSteps) {
        const double fastest = comparedTime(base, *std::min_element(steps.begin(), steps.end()),
                                            *std::min_element(syncs.begin(), syncs.end()));
        const Objectives best{fastest, statCost(opts_, out.stats, plan, statFloor)};
        if (broadcastInt(comm_, comm_.rank() == 0 &&
                                    !couldReplace(against, best, 0.0, opts_.timeWeight, opts_.kneeScale()))) {
          out.stopped = true;
          break;
        }
      }
    }
    // The median, like the running plan's own (median(steps_)): one step
    // disturbed by the host must not decide.
    if (!steps.empty()) {
      out.step = median(steps);
      out.sync = median(syncs);
      out.fastest = *std::min_element(steps.begin(), steps.end());
      out.time = comparedTime(base, out.step, out.sync);
    }
    out.steps = int64_t(steps.size());
    out.ok = !steps.empty();
  } catch (const NonFiniteGradient& e) {
    spdlog::warn("controller: exploring {} produced a non-finite gradient ({}); not a candidate this time", plan.key(),
                 e.what());
  }
  const std::string ranKey = sync_.plan(large_.front()).key();  // what the buckets ran, as they hold it
  for (int k : large_) sync_.setPlan(k, before);
  log_->undone(step, ranKey, ran, "exploration");
  return out;
}

void Controller::exploreShortlist(Decision& d, ControlledLoop& loop) {
  // Exploration from an in-memory snapshot, restored after each candidate
  // (ControlledLoop::restore drops the compressor states it made), in knee
  // order. The race (explore_min_steps) runs against the knee of what this
  // decision knows so far (rank 0's): the running plan's recent steps when
  // they still hold, or at a network decision the predicted knee's point,
  // and every candidate explored before. Nothing to explore, no snapshot: a
  // loop that cannot take one serves `explore: 0`.
  const bool race = opts_.exploreMinSteps > 0;
  const auto t0 = Clock::now();
  if (!d.exploreList.empty()) {
    const std::string snap = loop.snapshot();
    std::vector<Objectives> sofar;
    if (std::isfinite(d.current.time)) sofar.push_back(d.current);
    if (d.predictedKnee >= 0 && std::isfinite(d.kneePredicted.time)) sofar.push_back(d.kneePredicted);
    for (int64_t i : d.exploreList) {
      const Objectives against =
          paretoFront(sofar).empty() ? Objectives{INFINITY, INFINITY} : sofar[opts_.kneeOf(sofar)];
      const Plan& plan = candidates_[i].plan;
      d.measured.push_back(explore(d.step, plan, loop, race, against, d.floor[size_t(i)], d.base));
      const Measured& m = d.measured.back();
      if (m.ok) sofar.push_back({m.time, statCost(opts_, m.stats, plan, d.floor[size_t(i)])});
      loop.restore(snap);
    }
  }
  d.rec["explore_seconds"] = since(t0);
}

}  // namespace gradzip::trainer
