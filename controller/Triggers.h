// The controller's states as explicit state machines (STYLE.md §17): where
// the controller stands between start and its decisions (Phase), and each
// drift trigger's watch (Trigger: network ratio, gain, step time). Each
// transition is a named function; the controller reads states, never pairs
// of flags that together mean "where am I".
#pragma once

namespace gradzip::trainer {

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

}  // namespace gradzip::trainer
