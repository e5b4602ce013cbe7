// The training loop: builds model, data, optimizer, schedule and GradSync from a
// TrainConfig, trains with evaluation every N steps (training clock paused),
// writes the TTA log, checkpoints atomically and resumes, stops early with
// patience, applies the NaN policy, and checks that parameters stay identical
// across ranks.
#pragma once

#include "comm/Communicator.h"
#include "trainer/TrainConfig.h"

#include <map>
#include <memory>
#include <string>

namespace gradzip::trainer {

struct TrainResult {
  int64_t steps = 0;
  double trainSeconds = 0;
  std::map<std::string, double> finalMetrics;
  bool earlyStopped = false;
};

class Trainer {
 public:
  Trainer(TrainConfig cfg, comm::Communicator& comm);
  ~Trainer();
  // Trains to the end of the budget (or early stop). With resume, continues from
  // the run directory's last valid checkpoint (a fresh start if there is none).
  TrainResult run(bool resume);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gradzip::trainer
