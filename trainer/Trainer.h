// The training loop: builds model, data, optimizer, schedule and GradSync from a
// TrainConfig, trains with evaluation every N steps (training clock paused),
// writes the TTA log, checkpoints atomically and resumes, stops early with
// patience, applies the NaN policy, and checks that parameters stay identical
// across ranks.
#pragma once

#include "comm/Communicator.h"
#include "trainer/TrainConfig.h"

#include <ATen/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gradzip::trainer {

struct TrainResult {
  int64_t steps = 0;
  double trainSeconds = 0;
  std::map<std::string, double> finalMetrics;
  bool earlyStopped = false;
};

// One rank's training state as the objects that hold it have it, tensor by
// tensor under a name: every parameter ("model/...") and buffer ("buffer/..."),
// the optimizer's per-parameter state and group options ("optimizer/..."),
// every compressor state GradSync holds, error-feedback residuals and the
// last plan of each bucket included ("gradsync/bucket<k>/<plan>/..."), the
// step and progress counters ("progress/..."), the data sampler's position
// ("data/...") and the CPU generator ("rng/torch_cpu"). Read from the live
// objects, not through the checkpoint format the controller's in-memory
// snapshot uses (objects without tensor accessors, the optimizer's states and
// the compressors, through their own serialization), so a test can check that
// format's coverage too.
using StateTensors = std::vector<std::pair<std::string, at::Tensor>>;
// Called on a rank's training thread with `event` "snapshot" when the
// controller keeps the training state in memory (ControlledLoop::snapshot),
// "before_restore" and "restored" around putting it back (restore), and the
// step counter at that moment.
using StateObserver = std::function<void(const std::string& event, int64_t step, const StateTensors& state)>;

class Trainer {
 public:
  Trainer(TrainConfig cfg, comm::Communicator& comm);
  ~Trainer();
  // Trains to the end of the budget (or early stop). With resume, continues from
  // the run directory's last valid checkpoint (a fresh start if there is none).
  TrainResult run(bool resume);
  // For tests: `observer` sees the state at every in-memory snapshot and
  // restore of this run (before run()).
  void observeSnapshots(StateObserver observer);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gradzip::trainer
