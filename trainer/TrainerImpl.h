// Trainer::Impl, the state and parts of the training loop behind
// trainer/Trainer.h, shared by the files that implement it: Trainer.cpp (setup
// and the loop), TrainerStep.cpp (one step, the loss watch and the NaN policy),
// TrainerEvaluation.cpp (TTA rows and early stopping), TrainerState.cpp (the
// training state in memory and as named tensors) and TrainerCheckpoint.cpp
// (checkpoint files and resuming). Private to trainer/: only those files
// include it.
#pragma once

#include "comm/Communicator.h"
#include "controller/Controller.h"
#include "data/Factory.h"
#include "launch/ProgressFile.h"
#include "models/Registry.h"
#include "sync/GradSync.h"
#include "trainer/LrSchedule.h"
#include "trainer/Progress.h"
#include "trainer/Trainer.h"
#include "trainer/TtaLog.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gradzip::trainer {

struct Trainer::Impl final : ControlledLoop {
  TrainConfig cfg;
  comm::Communicator& comm;
  torch::Device device{torch::kCPU};  // run.device (trainer/Device.h)
  std::shared_ptr<models::Model> model;
  data::Datasets datasets;
  std::unique_ptr<data::DataLoader> train, eval;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<GradSync> sync;
  std::unique_ptr<Controller> controller;  // compress: auto
  std::unique_ptr<TtaLog> tta;
  std::unique_ptr<Progress> progress;
  ProgressFileWriter progressFile{""};  // rank 0 under an epoch rate schedule (launch/ProgressFile.h)
  int64_t totalSteps = 0;

  // Progress state (checkpointed).
  int64_t step = 0;
  double trainSeconds = 0;
  double controllerStartSeconds = 0;  // Controller::start's probe, charged when training starts
  int64_t samples = 0;
  int64_t bytes = 0;
  double best = -INFINITY;
  int64_t evalsWithoutImprovement = 0;
  int64_t skippedSteps = 0;
  std::map<std::string, double> lastMetrics;

  // Accumulated since the last TTA row.
  StepBreakdown acc;
  double lossSum = 0;
  int64_t accSteps = 0;
  // Compression error on this rank, ||x_e − x_c||² and ||x_e||², summed over
  // the steps GradSync measured (every kVnmseEvery-th, or all with the controller).
  double errorSq = 0, inputSq = 0;
  static constexpr int64_t kVnmseEvery = 10;
  int64_t lossSpikes = 0;
  // Cumulative over the run.
  int64_t saturated = 0;
  // Running mean of the loss for spike detection (train.loss_spike_factor).
  double lossEma = 0;
  int64_t lossEmaSteps = 0;

  // The accumulators above, in checkpoint order: a resumed run writes the same
  // TTA rows as an uninterrupted one even when checkpoints fall between rows.
  std::vector<double*> accumulatorFields() {
    return {&acc.dataWait, &acc.compute, &acc.encode, &acc.communicate, &acc.decode, &acc.exposed,
            &acc.optimizer, &acc.step, &lossSum, &lossEma, &errorSq, &inputSq};
  }
  std::vector<int64_t*> counterFields() { return {&accSteps, &lossSpikes, &saturated, &lossEmaSteps}; }
  // train.nan_policy: skip's accounting since the last TTA row (skipped steps,
  // non-finite and finite losses) and the current run of skipped steps. Kept
  // apart from counterFields so that checkpoints written before these
  // existed still load (they read as zeros).
  int64_t accSkipped = 0, accNonFinite = 0, accFiniteLosses = 0, skippedInRow = 0;
  std::vector<int64_t*> skipFields() { return {&accSkipped, &accNonFinite, &accFiniteLosses, &skippedInRow}; }

  // Warns about and counts a step whose loss jumps above lossSpikeFactor times
  // the running mean (an exponential moving average over ~20 steps, after 20
  // steps of warm-up). Non-finite losses are the NaN policy's business.
  void watchLoss(double loss);

  Impl(TrainConfig c, comm::Communicator& cm) : cfg(std::move(c)), comm(cm) {}

  std::string rankDir() const { return fmt::format("{}/rank{}", cfg.runDir(), comm.rank()); }

  // Builds the model (rank 0's parameters on every rank), data, optimizer,
  // schedule, GradSync and, with compress: auto, the controller.
  void setup();

  // The whole training state: model, buffers, optimizer, compressor state,
  // progress, accumulators, data position and RNG. Checkpoints write it to a
  // file (with the controller's state); the controller's exploration keeps it
  // in memory (snapshot/restore, which also keep the compressor keys and drop
  // the compressor states made since: ControlledLoop's contract). readState
  // puts back what writeState wrote.
  void writeState(torch::serialize::OutputArchive& ar);
  void readState(torch::serialize::InputArchive& ar);

  void saveCheckpoint();
  std::string snapshot() override;
  void restore(const std::string& snap) override;

  StateObserver observer;  // tests (Trainer::observeSnapshots)

  // The state writeState() keeps, read from the objects that hold it
  // (Trainer.h StateTensors).
  StateTensors liveState();

  // Picks the checkpoint every rank resumes from. Ranks checkpoint at the same
  // steps but a kill can land between two ranks' writes, so one rank's newest
  // may be a step ahead of another's; each keeps its previous checkpoint, and
  // all resume from the newest step that every rank holds. Returns this rank's
  // file for that step, or "" when no rank has a checkpoint.
  std::string agreeOnCheckpoint();
  // Loads the agreed checkpoint (the controller's plan, then the state); false
  // when no rank has one.
  bool loadCheckpoint();

  // Throws when the ranks' parameter checksums differ (train.checksum_every).
  void checkParametersAgree();

  // Tells an emulated launch with an epoch rate schedule how far training got.
  // A failed write costs the schedule its precision, not the run: one warning.
  void updateProgressFile();

  // The plans in use, in bucket order without repeats ("fp16@engine" when
  // every bucket runs one plan; "thc{bits: 4}@ps;fp16@engine" with the
  // controller's small-bucket plan).
  std::string planSummary() const;

  // Writes a TTA row; returns true when early stopping triggers.
  bool evaluateAndLog();

  struct StepDone {
    StepMeasure measure;
    double loss = 0;
    int64_t samples = 0;  // over all ranks
  };

  // One optimizer step with its accounting (step counter, samples, bytes,
  // TTA accumulators, loss watch). nullopt when the data ran out: the next
  // epoch has been started and no step was taken. While exploring, a
  // non-finite gradient propagates (the controller drops the candidate);
  // otherwise the NaN policy applies.
  std::optional<StepDone> trainStep(bool exploring);

  // train.nan_policy: skip drops a step with a non-finite gradient, which
  // helps past a rare overflow but not a diverged model (every later step is
  // skipped too). Stops the run when the skipped steps exceed either bound
  // (the ranks count the same steps, so all stop at the same one).
  void checkSkipBound(double loss);

  StepMeasure exploreStep() override;

  // Sets up, writes config.yaml and environment.json (rank 0), resumes when
  // asked, and trains to the end of the budget or an early stop.
  TrainResult run(bool resume);
};

}  // namespace gradzip::trainer
