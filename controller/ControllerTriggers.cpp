// Implements the controller's triggers (controller/Controller.h): each step's
// observations against the detectors' references (controller/Triggers.h: the
// network's observed/predicted ratio, the gain, the step time; severe and
// sharp slowdowns), rank 0's verdict broadcast ahead of the check that acts on
// it, and the bandwidth soundings while the running plan is latency-bound.
#include "controller/Controller.h"

#include "controller/ControllerDetail.h"
#include "controller/PlanCost.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h

void Controller::resetMeasurements() {
  recent_.clear();
  recentTimings_.clear();
  recentStats_ = {};
  recentComm_ = recentStep_ = 0;
  ratios_.clear();
  calibration_.clear();
  netTrigger_.recalibrate();
  gainTrigger_.recalibrate();
  stepTrigger_.quiet();  // its reference is the decision's (decide, load)
  drifting_ = severe_ = sharp_ = false;
  gainSeen_ = 0;
  changeSince_ = -1;
  // The time the model the plan was chosen under gives a sounding (none while
  // β is still being measured at the start): a first sounding much faster
  // than that finds a link that changed under the decision.
  const bool modelled = std::isfinite(net_.alpha) && std::isfinite(net_.beta) && net_.alpha >= 0 && net_.beta >= 0;
  sounding_.reset(modelled ? comm::ringAllReduceCost(double(BandwidthSounding::periodicBytes(comm_.size())),
                                                     comm_.size(), net_)
                           : 0.0);
  lastSound_ = -1;
  soundAgain_ = soundTriggered_ = false;
  steps_.clear();
  syncs_.clear();
}

void Controller::observe(const StepMeasure& m) {
  ++observedSteps_;
  ++planSteps_;
  CompressionStats stats;
  double observed = 0, predicted = 0;
  for (size_t i = 0; i < large_.size(); ++i) {
    stats += sync_.lastWeightedStats(large_[i]);
    const auto& bd = sync_.lastBreakdown(large_[i]);
    if (!(bd.communicate > 0)) continue;
    comm::AlphaBetaSample c = activeCoef_[i];  // fixed while the plan is (applyPlan)
    c.seconds = bd.communicate;
    fitter_.add(c);
    lastSamples_.push_back(c);
    if (lastSamples_.size() > kRatioWindow) lastSamples_.pop_front();
    observed += bd.communicate;
    predicted += planSeconds(c, net_);
  }
  if (recent_.size() < kRecentCap) {
    recent_.push_back(m);
    addTimings(recentTimings_);
    recentComm_ += observed;
    recentStep_ += m.step;
  }
  steps_.push_back(m.step);
  if (steps_.size() > kRatioWindow) steps_.erase(steps_.begin());
  syncs_.push_back(std::max(0.0, m.step - m.compute));
  if (syncs_.size() > kRatioWindow) syncs_.erase(syncs_.begin());
  recentStats_ += stats;
  // recent_ holds the steps since the last decision (resetMeasurements).
  const double gain = stats.inputSq > 0 ? stats.appliedSq / stats.inputSq : NAN;
  const double ratio = predicted > 0 ? observed / predicted : NAN;
  // Calibrate the references on the first observations of a plan, then
  // watch. The gain of an error-feedback compressor keeps moving while its
  // residual builds up after a switch, so its reference waits longer.
  if (!gainTrigger_.watching() && ++gainSeen_ >= kGainSettle) {
    const double g = recentStats_.inputSq > 0 ? recentStats_.appliedSq / recentStats_.inputSq : 0;
    if (g > 0) {
      gainDrift_.reset(g);
      gainTrigger_.calibrated();
    }
  }
  if (!netTrigger_.watching()) {
    if (std::isfinite(ratio) && ratio > 0) calibration_.push_back(ratio);
    if (calibration_.size() == kCalibration) {
      netDrift_.reset(median(calibration_));
      netTrigger_.calibrated();
    }
    return;
  }
  if (std::isfinite(ratio) && ratio > 0) {
    ratios_.push_back(ratio);
    if (ratios_.size() > kRatioWindow) ratios_.erase(ratios_.begin());
  }
  const bool drift = !ratios_.empty() && netDrift_.update(median(ratios_));
  // The refit at the next decision should see the network as it is now: its
  // window starts where the drift does.
  if (drift && !drifting_) {
    fitter_.clear();
    drifting_ = true;
  }
  const double kept = double(std::max<size_t>(1, recent_.size()));
  const double meanStep = recentStep_ / kept, meanComm = recentComm_ / kept;
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
                observed, predicted, ratios_.empty() ? NAN : median(ratios_), netDrift_.smoothed(),
                netDrift_.reference(), gain, netTrigger_.fired() ? "; network changed" : "",
                gainTrigger_.fired() ? "; gain drifted" : "");
  if (gainTrigger_.watching()) gainTrigger_.judge(gainDrift_.update(gain));
  if (followup_.step >= 0 && followup_.count < opts_.followupSteps) {
    followup_.sum += m.step;
    followup_.sumBase += m.step - m.exposed;
    followup_.sumExposed += m.exposed;
    if (++followup_.count == opts_.followupSteps) {
      const double n = double(followup_.count), measured = followup_.sum / n;
      nlohmann::json rec{{"event", "followup"},
                         {"decision_step", followup_.step},
                         {"plan", active_.key()},
                         {"predicted_step", followup_.predicted},
                         {"explored_step", followup_.explored},
                         {"measured_step", measured},
                         {"prediction_error", (followup_.predicted - measured) / measured},
                         {"measured_base", followup_.sumBase / n},
                         {"measured_exposed", followup_.sumExposed / n}};
      if (std::isfinite(followup_.predictedBase)) {
        rec["predicted_base"] = followup_.predictedBase;
        rec["predicted_exposed"] = followup_.predictedExposed;
      }
      writeDecision(rec.dump());
    }
  }
}

void Controller::sendVerdict(int64_t step) {
  int64_t reason = kNone, soundBytes = 0, betaSteps = 0;
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
    const int64_t elapsed = step - lastDecision_;
    // A severe or sharp slowdown after a decision that measured its
    // references (it kept or explored the plan that runs) is the link's, not
    // the model's, and does not wait out network_interval (controller_ablation.md,
    // "Two sharp steps, and prompt slowdowns after a measured decision").
    // After a predicted knee (whose
    // references carry the model's error) it waits network_interval, as
    // every change does; after a false alarm (backoff > 1) network_interval
    // too, not the backoff (actOnChange in ControllerDetail.h).
    if (soundTriggered_ && elapsed >= opts_.networkInterval)
      reason = kSounding;  // confirmed by two soundings: no settling, no backoff
    else if (settled &&
             actOnChange(severe_ || sharp_, measuredRefs_, elapsed, opts_.networkInterval, networkBackoff_)) {
      reason = netTrigger_.fired() ? kNetwork : kStepTime;
      // Before the medians have moved, β comes from the sharp steps alone.
      if (sharp_ && !severe_ && step - changeSince_ < kPersist) betaSteps = int64_t(kSharpSteps);
    }
    else if (gainTrigger_.fired() && elapsed >= opts_.minInterval)
      reason = kGain;
    if (reason == kNone) soundBytes = soundingDue(step);
  }
  // One buffer for every check: the last broadcast from it has completed
  // (afterStep waited for it before acting).
  if (!verdict_.defined()) verdict_ = torch::zeros({3}, torch::kLong);
  int64_t* v = verdict_.data_ptr<int64_t>();
  v[0] = reason;
  v[1] = soundBytes;
  v[2] = betaSteps;
  verdictWork_ = comm_.broadcast(verdict_, 0);
  verdictPending_ = true;
}

int64_t Controller::soundingDue(int64_t step) {
  if (opts_.soundEvery <= 0 || opts_.pin || phase_ != Phase::Decided || !latencyBound_ || recent_.empty()) return 0;
  const int64_t bytes = BandwidthSounding::periodicBytes(comm_.size());
  if (lastSound_ < 0 || soundAgain_) return bytes;
  // Every sound_every steps, or less often where a sounding would take more
  // than sound_share of the steps in between (a slow link, fast steps).
  const double meanStep = recentStep_ / double(recent_.size());
  const double interval = std::max(double(opts_.soundEvery), sounding_.latest() / (opts_.soundShare * meanStep));
  return double(step - lastSound_) >= interval ? bytes : 0;
}

double Controller::timedAllReduce(int64_t bytes) {
  // Zeros, which the sum keeps zero: the buffer is reused as it is.
  if (!soundBuffer_.defined() || soundBuffer_.numel() != bytes / 4) soundBuffer_ = torch::zeros({bytes / 4}, torch::kFloat);
  const auto t0 = Clock::now();
  comm_.allReduce(soundBuffer_).wait();
  return since(t0);
}

void Controller::sound(int64_t step, int64_t bytes) {
  const double seconds = timedAllReduce(bytes);
  if (comm_.rank() == 0) {
    const double beta = BandwidthSounding::betaOf(seconds, bytes, comm_.size(), net_.alpha);
    const auto verdict = sounding_.add(seconds);
    lastSound_ = step;
    soundAgain_ = verdict == BandwidthSounding::Verdict::Suspect;
    soundTriggered_ = soundTriggered_ || verdict == BandwidthSounding::Verdict::Changed;
    static constexpr const char* kVerdicts[] = {"reference", "steady", "suspect", "changed"};
    writeDecision(nlohmann::json{{"step", step},
                                 {"event", "sounding"},
                                 {"plan", active_.key()},
                                 {"bytes", bytes},
                                 {"seconds", seconds},
                                 {"beta", beta},
                                 {"change", sounding_.change()},
                                 {"verdict", kVerdicts[int(verdict)]}}
                      .dump());
  }
}

}  // namespace gradzip::trainer
