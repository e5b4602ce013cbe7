// The controller's triggers: when to decide again. The states are explicit
// state machines (STYLE.md §17): where the controller stands between start and
// its decisions (Phase), and each drift trigger's watch (Trigger: network
// ratio, gain, step time). Each transition is a named function; the
// controller reads states, never pairs of flags that together mean "where am
// I". Triggers holds them with their references and turns each step's
// observations into rank 0's verdict at a trigger check.
#pragma once

#include "comm/Communicator.h"
#include "controller/ControllerOptions.h"
#include "controller/DriftDetector.h"

#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace gradzip::trainer {

struct ControllerState;

// Warmup --provisionalTaken--> Provisional --decisionTaken--> Decided, or
// Warmup --decisionTaken--> Decided where the provisional step is off.
enum class Phase {
  Warmup,       // on `initial` (or the sparse start), the provisional step still ahead
  Provisional,  // the provisional step ran; the first decision is ahead
  Decided,      // at least one decision taken
};

inline Phase provisionalTaken(Phase p) { return p == Phase::Warmup ? Phase::Provisional : p; }
inline Phase decisionTaken(Phase) { return Phase::Decided; }

// One drift trigger:
//   Calibrating --calibrated--> Watching <--judge--> Fired
//   any --recalibrate--> Calibrating;  Fired --quiet--> Watching
// Calibrating: its reference is being measured on the running plan's first
// steps. Watching: it compares each step with the reference. Fired: the last
// step showed drift beyond its threshold.
class Trigger {
 public:
  enum class State { Calibrating, Watching, Fired };

  State state() const { return state_; }
  bool watching() const { return state_ != State::Calibrating; }
  bool fired() const { return state_ == State::Fired; }

  // The reference is set: start comparing.
  void calibrated() { state_ = State::Watching; }
  // A step judged against the reference; nothing while calibrating.
  void judge(bool drifted) {
    if (state_ != State::Calibrating) state_ = drifted ? State::Fired : State::Watching;
  }
  // A new plan: measure the reference afresh.
  void recalibrate() { state_ = State::Calibrating; }
  // Keep the reference, forget the last verdict.
  void quiet() {
    if (state_ == State::Fired) state_ = State::Watching;
  }

 private:
  State state_ = State::Calibrating;
};

// The drift triggers and the phase, with their references (rank 0 evaluates
// the triggers; every rank keeps the phase). Each step's observe() judges the
// step against the references the last decision set (adoptReferences), or
// calibrates them on the running plan's first steps after measureAfresh();
// at a trigger check rank 0's verdict (send) travels while the next steps
// train, and the next check acts on it (receive). The triggers, the
// thresholds and their reasons are in docs/controller.md, "Triggers".
class Triggers {
 public:
  Triggers(const ControllerOptions& opts, comm::Communicator& comm);

  Phase phase() const { return phase_; }
  void provisionalTaken() { phase_ = trainer::provisionalTaken(phase_); }
  // A decision ran: the phase moves on, and the β steps of the sharp change
  // that called it are spent.
  void decisionTaken() {
    phase_ = trainer::decisionTaken(phase_);
    betaSteps_ = 0;
  }

  // One step of the running plan, as observe() judges it.
  struct Observation {
    double step = 0, compute = 0;                // wall seconds, and its forward + backward
    double observedComm = 0, predictedComm = 0;  // over the large buckets: the collectives, and the α-β model
    double gain = NAN;                           // this step's gain (NaN without statistics)
    double planGain = 0;  // the gain over the running plan's steps since the last decision (0: none)
    double meanStep = 0, meanComm = 0;  // those steps' means of the step and of its observed communication
  };
  struct Seen {
    bool watching = false;    // the network trigger is calibrated (it was calibrating: nothing judged)
    bool driftBegan = false;  // the network detector saw a drift begin (the link's fit starts over)
  };
  Seen observe(const Observation& o);
  // A new plan, or the decision's own: every reference is measured afresh,
  // except the step time's, which the decision sets (adoptReferences).
  void measureAfresh();
  // The decision's step-time references, the chosen plan's step and step −
  // compute (ignored unless finite and positive), and whether they are
  // measured steps (the plan kept or explored) rather than a prediction.
  void adoptReferences(double stepRef, double syncRef, bool measured);
  // After a network-type decision: whether its refit found the link changed.
  // A false alarm doubles the wait before the next network trigger, up to
  // min_interval; a real change resets it. Returns the network_interval
  // multiplier.
  int64_t networkJudged(bool changed);

  // The running plan's latest steps, as the last decision's trigger saw them:
  // the median step and step − compute of the last kRatioWindow steps, or
  // after a sharp change of its betaSteps() steps alone.
  bool hasSteps() const { return !steps_.empty(); }
  double latestStep() const { return latest(steps_); }
  double latestSync() const { return latest(syncs_); }
  int64_t betaSteps() const { return betaSteps_; }
  // The smoothed gain's signed change since its reference (negative: it fell).
  double gainChange() const { return gainDrift_.signedChange(); }

  // The trigger check's verdict: why to decide (detail::Reason) and the bytes
  // of a bandwidth sounding due first (0: none).
  struct Verdict {
    int64_t reason = 0, soundBytes = 0;
  };
  // Collective, at a check: the verdict the last check sent (waited for),
  // kInitial before the first decision.
  Verdict receive();
  // Collective, at a check: rank 0's verdict on the state after `step`
  // (`soundTriggered`: the soundings confirmed a change; `soundBytes`: a
  // sounding due if nothing else is), broadcast without waiting.
  void send(int64_t step, int64_t lastDecision, bool soundTriggered, int64_t soundBytes);
  // Collective, once after the last step: waits for the last verdict.
  void finish();

  // The checkpointed part (controller/ControllerState.h): the phase, the
  // step-time references, the measured-references flag and the backoff.
  void save(ControllerState& st) const;
  void load(const ControllerState& st);

 private:
  double latest(const std::vector<double>& v) const;

  const ControllerOptions& opts_;
  comm::Communicator& comm_;
  Phase phase_ = Phase::Warmup;
  // The network's observed/predicted ratio, the smoothed gain, and the step
  // time against the one the last decision measured for its plan.
  DriftDetector netDrift_, gainDrift_, stepDrift_;
  Trigger netTrigger_, gainTrigger_, stepTrigger_;
  std::vector<double> steps_;        // the last step times (median for stepDrift_)
  std::vector<double> syncs_;        // the last step − compute times
  std::vector<double> ratios_;       // the last observed/predicted communication ratios
  std::vector<double> calibration_;  // observed/predicted ratios after a decision, before the reference is set
  double syncRef_ = 0;  // step − compute the last decision measured for its plan (its step: stepDrift_)
  int64_t changeSince_ = -1;  // rank 0: the check at which a network/step-time change was first seen
  bool severe_ = false;  // rank 0: step − compute has risen by kSevere of the step since the last decision
  bool sharp_ = false;   // rank 0: so has each of the last kSharpSteps steps', its collectives slower too
  bool drifting_ = false;  // the network detector has seen drift since the last decision
  int64_t gainSeen_ = 0;   // observations of the running plan's gain since it started
  // Steps whose collectives alone give β at this decision (a sharp change,
  // before the medians moved); 0: the last kRatioWindow.
  int64_t betaSteps_ = 0;
  int64_t networkBackoff_ = 1;  // network_interval multiplier after false alarms
  // rank 0: the last decision's references are the running plan's measured
  // steps (it kept or explored the plan), not a prediction.
  bool measuredRefs_ = false;
  // The verdict in flight and its handle.
  torch::Tensor verdict_;
  comm::Work verdictWork_;
  bool verdictPending_ = false;
};

}  // namespace gradzip::trainer
