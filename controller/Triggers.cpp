// Implements controller/Triggers.h: each step's observations against the
// detectors' references (the network's observed/predicted ratio, the gain,
// the step time; severe and sharp slowdowns), and rank 0's verdict broadcast
// ahead of the check that acts on it.
#include "controller/Triggers.h"

#include "controller/ControllerDetail.h"
#include "controller/ControllerState.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h

Triggers::Triggers(const ControllerOptions& opts, comm::Communicator& comm)
    : opts_(opts),
      comm_(comm),
      netDrift_(opts.networkDrift, kSmoothing, kCalibration),
      gainDrift_(opts.gainDrift, kSmoothing, kCalibration),
      stepDrift_(opts.networkDrift, kSmoothing, kCalibration) {}

void Triggers::measureAfresh() {
  ratios_.clear();
  calibration_.clear();
  netTrigger_.recalibrate();
  gainTrigger_.recalibrate();
  stepTrigger_.quiet();  // its reference is the decision's (adoptReferences, load)
  drifting_ = severe_ = sharp_ = false;
  gainSeen_ = 0;
  changeSince_ = -1;
  steps_.clear();
  syncs_.clear();
}

Triggers::Seen Triggers::observe(const Observation& o) {
  Seen seen;
  steps_.push_back(o.step);
  if (steps_.size() > kRatioWindow) steps_.erase(steps_.begin());
  syncs_.push_back(std::max(0.0, o.step - o.compute));
  if (syncs_.size() > kRatioWindow) syncs_.erase(syncs_.begin());
  const double ratio = o.predictedComm > 0 ? o.observedComm / o.predictedComm : NAN;
  // Calibrate the references on the first observations of a plan, then
  // watch. The gain of an error-feedback compressor keeps moving while its
  // residual builds up after a switch, so its reference waits longer.
  if (!gainTrigger_.watching() && ++gainSeen_ >= kGainSettle) {
    if (o.planGain > 0) {
      gainDrift_.reset(o.planGain);
      gainTrigger_.calibrated();
    }
  }
  if (!netTrigger_.watching()) {
    if (std::isfinite(ratio) && ratio > 0) calibration_.push_back(ratio);
    if (calibration_.size() == kCalibration) {
      netDrift_.reset(median(calibration_));
      netTrigger_.calibrated();
    }
    return seen;
  }
  seen.watching = true;
  if (std::isfinite(ratio) && ratio > 0) {
    ratios_.push_back(ratio);
    if (ratios_.size() > kRatioWindow) ratios_.erase(ratios_.begin());
  }
  const bool drift = !ratios_.empty() && netDrift_.update(median(ratios_));
  // The refit at the next decision should see the network as it is now: its
  // window starts where the drift does.
  if (drift && !drifting_) {
    seen.driftBegan = true;
    drifting_ = true;
  }
  const double meanStep = o.meanStep, meanComm = o.meanComm;
  // The detector above sees changes against its reference. A model that was
  // already wrong when the reference was taken (a decision made while the
  // link was changing) shows in the reference itself: observed/predicted
  // outside [1/(1 + 2·drift), 1 + 2·drift], with the mispredicted part at
  // least kMinImpact of the step. Without this the controller would run a
  // plan chosen for the old link until the gain trigger.
  const double ref = netDrift_.reference(), bound = 1 + 2 * opts_.networkDrift;
  const bool mismatch = (ref > bound || ref < 1 / bound) && std::abs(1 - 1 / ref) * meanComm >= kMinImpact * meanStep;
  netTrigger_.judge((drift && netDrift_.change() * meanComm >= kMinImpact * meanStep) || mismatch);
  // The step time against the one the last decision measured for its plan: a
  // network change the ratio detector calibrated itself into (it happened
  // right after a decision) still shows here.
  // Only a change the synchronisation explains (step − compute moves at
  // least half as much, the same way) counts: a host whose compute slowed
  // down (load from other processes) is not a reason to re-explore plans.
  const double stepNow = median(steps_), dStep = stepNow - stepDrift_.reference(), dSync = median(syncs_) - syncRef_;
  const bool stepArmed = stepTrigger_.watching();
  if (stepArmed)
    stepTrigger_.judge(stepDrift_.update(stepNow) && dSync * dStep > 0 && std::abs(dSync) >= 0.5 * std::abs(dStep));
  severe_ = stepArmed && dSync >= kSevere * stepDrift_.reference();
  sharp_ = stepArmed && syncs_.size() >= kSharpSteps && ratios_.size() >= kSharpSteps &&
           *std::min_element(syncs_.end() - kSharpSteps, syncs_.end()) - syncRef_ >= kSevere * stepDrift_.reference() &&
           *std::min_element(ratios_.end() - kSharpSteps, ratios_.end()) >=
               netDrift_.reference() * (1 + 2 * opts_.networkDrift);
  spdlog::debug("controller: comm observed {:.3g} s, predicted {:.3g} s (ratio median {:.3g}, smoothed {:.3g}, "
                "reference {:.3g}); gain {:.4g}{}{}",
                o.observedComm, o.predictedComm, ratios_.empty() ? NAN : median(ratios_), netDrift_.smoothed(),
                netDrift_.reference(), o.gain, netTrigger_.fired() ? "; network changed" : "",
                gainTrigger_.fired() ? "; gain drifted" : "");
  if (gainTrigger_.watching()) gainTrigger_.judge(gainDrift_.update(o.gain));
  return seen;
}

void Triggers::adoptReferences(double stepRef, double syncRef, bool measured) {
  const bool usable = std::isfinite(stepRef) && stepRef > 0;
  if (usable) {  // rank 0 alone evaluates the triggers
    stepDrift_.reset(stepRef);
    syncRef_ = syncRef;
    stepTrigger_.calibrated();
  }
  measuredRefs_ = measured && usable;
}

int64_t Triggers::networkJudged(bool changed) {
  // A network trigger whose refit found the bandwidth within network_drift
  // was a false alarm (noise on short steps, a loaded host): the next network
  // trigger waits twice as long, up to min_interval. A real change resets the
  // wait.
  if (changed)
    networkBackoff_ = 1;
  else
    networkBackoff_ = std::min(2 * networkBackoff_, std::max<int64_t>(1, opts_.minInterval / opts_.networkInterval));
  return networkBackoff_;
}

double Triggers::latest(const std::vector<double>& v) const {
  // A sharp change called this decision: only the running plan's last
  // betaSteps_ steps see the new link.
  return betaSteps_ > 0 && v.size() > size_t(betaSteps_) ? median(std::vector<double>(v.end() - betaSteps_, v.end()))
                                                         : median(v);
}

Triggers::Verdict Triggers::receive() {
  Verdict v;
  if (verdictPending_) {
    verdictWork_.wait();
    verdictPending_ = false;
    const int64_t* sent = verdict_.data_ptr<int64_t>();
    v.reason = sent[0];
    v.soundBytes = sent[1];
    betaSteps_ = sent[2];
  }
  // The first decision needs no verdict: every rank knows it is due.
  if (phase_ != Phase::Decided) v.reason = kInitial;
  return v;
}

void Triggers::send(int64_t step, int64_t lastDecision, bool soundTriggered, int64_t soundBytes) {
  int64_t reason = kNone, betaSteps = 0;
  if (comm_.rank() == 0) {
    // A network or step-time change must persist for kPersist steps before
    // it is acted on: the detectors see it once the median of their
    // kRatioWindow observations has moved (kRatioWindow/2 + 1 of them), and
    // kPersist steps later every observation in the window (β from the
    // running plan's collectives, its step time) sees the new network, not a
    // mix, and a burst of noise has passed.
    // A severe change (the median step − compute of the window up by kSevere
    // of the step: most of the window has seen it) is acted on at the first
    // check that sees it: each step of waiting runs the old plan on the slow
    // link.
    // A sharp rise (kSharpSteps steps in a row, each up by kSevere of the
    // step, their collectives 1 + 2·network_drift slower than the model's
    // reference) is acted on before the medians move.
    const bool changed = netTrigger_.fired() || stepTrigger_.fired() || sharp_;
    if (!changed) changeSince_ = -1;
    else if (changeSince_ < 0) changeSince_ = step;
    const bool settled = changed && (step - changeSince_ >= kPersist || severe_ || sharp_);
    const int64_t elapsed = step - lastDecision;
    // A severe or sharp slowdown after a decision that measured its
    // references (it kept or explored the plan that runs) is the link's, not
    // the model's, and does not wait out network_interval (controller_ablation.md,
    // "Two sharp steps, and prompt slowdowns after a measured decision").
    // After a predicted knee (whose references carry the model's error) it
    // waits network_interval, as every change does; after a false alarm
    // (backoff > 1) network_interval too, not the backoff (actOnChange in
    // ControllerDetail.h).
    if (soundTriggered && elapsed >= opts_.networkInterval)
      reason = kSounding;  // confirmed by two soundings: no settling, no backoff
    else if (settled &&
             actOnChange(severe_ || sharp_, measuredRefs_, elapsed, opts_.networkInterval, networkBackoff_)) {
      reason = netTrigger_.fired() ? kNetwork : kStepTime;
      // Before the medians have moved, β comes from the sharp steps alone.
      if (sharp_ && !severe_ && step - changeSince_ < kPersist) betaSteps = int64_t(kSharpSteps);
    }
    else if (gainTrigger_.fired() && elapsed >= opts_.minInterval)
      reason = kGain;
    if (reason != kNone) soundBytes = 0;
  } else {
    soundBytes = 0;
  }
  // One buffer for every check: the last broadcast from it has completed
  // (receive waited for it before acting).
  if (!verdict_.defined()) verdict_ = torch::zeros({3}, torch::kLong);
  int64_t* v = verdict_.data_ptr<int64_t>();
  v[0] = reason;
  v[1] = soundBytes;
  v[2] = betaSteps;
  verdictWork_ = comm_.broadcast(verdict_, 0);
  verdictPending_ = true;
}

void Triggers::finish() {
  if (!verdictPending_) return;
  verdictPending_ = false;
  verdictWork_.wait();
}

void Triggers::save(ControllerState& st) const {
  st.decided = phase_ == Phase::Decided;
  st.provisionalDone = phase_ != Phase::Warmup;
  st.stepArmed = stepTrigger_.watching();
  st.stepReference = stepDrift_.reference();
  st.syncReference = syncRef_;
  st.measuredRefs = measuredRefs_;
  st.networkBackoff = networkBackoff_;
}

void Triggers::load(const ControllerState& st) {
  phase_ = st.decided ? Phase::Decided : st.provisionalDone ? Phase::Provisional : Phase::Warmup;
  if (st.stepArmed && st.stepReference > 0) {
    stepDrift_.reset(st.stepReference);
    syncRef_ = st.syncReference;
    stepTrigger_.calibrated();
  }
  measuredRefs_ = st.measuredRefs;
  networkBackoff_ = st.networkBackoff;
}

}  // namespace gradzip::trainer
