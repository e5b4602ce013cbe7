// Progress reporting on rank 0: a one-line progress bar (step, loss, metric,
// throughput) redrawn in place when stderr is a terminal, plain log lines at
// each evaluation otherwise. Other ranks print nothing.
#pragma once

#include "trainer/TtaLog.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace gradzip::trainer {

class Progress {
 public:
  Progress(bool enabled, int64_t totalSteps);
  void step(int64_t step, double loss, double samplesPerSecond);
  void evaluation(const TtaRow& row);
  void finish();

 private:
  bool enabled_, tty_;
  int64_t total_;
  std::string lastMetric_;
  std::chrono::steady_clock::time_point lastDraw_;
  bool drawn_ = false;
};

}  // namespace gradzip::trainer
