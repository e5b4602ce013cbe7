// Progress reporting on rank 0. On a terminal (stderr is a tty) a live status
// line shows step, epoch, loss, the last evaluation's metrics, throughput,
// ETA and skipped steps, redrawn in place below the log lines (util/Log.h).
// Logs and pipes get plain lines instead: one per evaluation, and a progress
// line at most every kPlainInterval. Other ranks print nothing.
#pragma once

#include "trainer/TtaLog.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace gradzip::trainer {

class Progress {
 public:
  // `tty`: draw the live line (callers pass isatty(STDERR_FILENO)).
  Progress(bool enabled, int64_t totalSteps, int64_t stepsPerEpoch, bool tty);
  // After each optimizer step: the step counter, this step's loss (NaN/Inf
  // shown as such), the throughput, and the skipped steps so far.
  void step(int64_t step, double loss, double samplesPerSecond, int64_t skippedSteps);
  void evaluation(const TtaRow& row);
  void finish();

  // The live line's text for these values (without terminal control codes).
  std::string line(int64_t step, double loss, double samplesPerSecond, int64_t skippedSteps) const;
  // "1h02m", "3m05s", "12s"; "?" for a negative or non-finite count.
  static std::string duration(double seconds);

  static constexpr std::chrono::seconds kPlainInterval{30};

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_, tty_;
  int64_t total_, perEpoch_;
  std::string lastMetric_;
  Clock::time_point lastDraw_;
  bool drawn_ = false;
  // The ETA's rate: steps and time since the first step this process saw
  // (a resumed run starts counting at its checkpoint's step).
  int64_t firstStep_ = -1;
  Clock::time_point firstTime_;
};

}  // namespace gradzip::trainer
