// The MOO controller (`compress: auto`): picks each large bucket's plan
// (compressor, parameters, collective) at run time, after the flexible-
// communication paper §3-E (DIGEST.md §5), generalised from one TopK ratio
// to every compressor family. A decision refits the link (α, β), screens
// every candidate on rank 0 (encode/decode timed, wire bits through the α-β
// model, statistics on the last gradient), explores the candidates near the
// knee of the predicted front from an in-memory snapshot, and broadcasts the
// knee of the measured points (controller/Pareto.h). Triggers: the first
// decision after warmup_steps, a network or step-time change, a bandwidth
// sounding, or a drift of the smoothed gain. docs/controller.md describes the
// algorithm, its start-up (provisional step, sparse start, rewind) and its
// logs: <run>/decisions.jsonl (rank 0), <run>/rank<r>/plans.jsonl and
// <run>/rank<r>/undone.jsonl.
//
// It sees the buckets through sync/SyncedBuckets.h and the training loop
// through ControlledLoop below, and composes parts that own their state:
// LinkEstimator (α, β, soundings), Triggers (phase, drift triggers,
// verdicts), Screening, RecentSteps and DecisionLog (controller/<Part>.h).
#pragma once

#include "comm/Communicator.h"
#include "comm/CostModel.h"
#include "comm/LocalCommunicator.h"
#include "controller/Candidates.h"
#include "controller/Followup.h"
#include "controller/GradientNoise.h"
#include "sync/SyncedBuckets.h"

#include <torch/serialize/archive.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gradzip::trainer {

// What the trainer measured in one step.
struct StepMeasure {
  double step = 0;     // wall seconds of the whole step
  double compute = 0;  // forward + backward
  double exposed = 0;  // waiting for gradient sync after backward
  double encode = 0, communicate = 0, decode = 0;  // the sync's own work (comm thread)
};

// The training loop as the controller drives it during exploration.
class ControlledLoop {
 public:
  virtual ~ControlledLoop() = default;
  // One training step under the current plans: no evaluation, checkpoint, log
  // or progress output. Throws NonFiniteGradient like a normal step.
  virtual StepMeasure exploreStep() = 0;
  // The complete training state in memory, the compressor states that exist
  // then included (by their keys, GradSync::compressorKeys), and putting it
  // back exactly: restore() also drops every compressor state made since the
  // snapshot (GradSync::keepOnly), so plans tried in between leave no trace.
  // Called only where exploration or the provisional rewind runs: a loop that
  // cannot snapshot serves a controller with `explore: 0` and
  // `provisional_rewind: false`.
  virtual std::string snapshot() = 0;
  virtual void restore(const std::string& snapshot) = 0;
};

class DecisionLog;
class LinkEstimator;
class RecentSteps;
class Screening;
class Triggers;
struct Objectives;

class Controller {
 public:
  // runDir: decisions.jsonl (rank 0) and rank<r>/plans.jsonl go there.
  Controller(ControllerOptions opts, comm::Communicator& comm, SyncedBuckets& sync, std::string runDir);
  ~Controller();

  // Collective. Probes α and puts every bucket on its starting plan (β
  // follows from the first steps' collectives: settleBeta). Returns the
  // seconds it took (the caller adds them to the training time).
  double start(int64_t step);
  // Collective, once, just before the first training step (after any
  // resume): keeps the training state in memory (loop.snapshot()) when the
  // provisional step, still ahead, may rewind to it (provisional_rewind).
  // Returns the seconds it took (the caller adds them to the training time).
  double begin(int64_t step, ControlledLoop& loop);
  // begin() kept a state the provisional step may still rewind to: the steps
  // until then are measurement, so the trainer neither evaluates nor
  // checkpoints them (a TTA row of an undone step would stay in the log).
  bool mayRewind() const { return !rewindState_.empty(); }
  // Collective, once, after the last step: waits for the trigger check's
  // last verdict (afterStep sends each one ahead of the check that acts on it).
  void finish();
  // Collective, after every training step. Returns the wall seconds it spent,
  // all of them: bookkeeping, trigger checks and soundings as well as
  // deciding and exploring (the caller adds them to the training time).
  double afterStep(int64_t step, const StepMeasure& m, ControlledLoop& loop);

  // A tensor's update factor under the trainer's optimizer
  // (the trainer's OptimizerGeometry updateScale): with `geometry: optimizer`,
  // rank 0 measures every statistical cost in it, refreshed at each trigger
  // check.
  using Geometry = std::function<std::optional<double>(const torch::Tensor& param)>;
  void setGeometry(Geometry scaleOf) { geometry_ = std::move(scaleOf); }
  // Samples per rank per step, for the gradient noise scale (noise_every).
  void setBatch(int64_t perRank) { batch_ = perRank; }

  const comm::NetworkParams& network() const;
  const std::vector<Candidate>& candidates() const { return candidates_; }
  int64_t decisions() const { return decisions_; }

  void save(torch::serialize::OutputArchive& ar) const;
  // Restores controller/ControllerState.h: the running plan (by its key), the
  // decision bookkeeping, the step-time trigger's references and the
  // gradient noise sums; call before GradSync::load so the restored plan's
  // compressor state is read. UserError when the checkpoint's state is of
  // another version, or its plan is none this config could run.
  void load(torch::serialize::InputArchive& ar);
  // After load(), once the trainer knows the run resumed at `step`: the
  // decision log (rank 0) and this rank's plan log keep only the records of
  // steps up to it (util/RunLogs.h), and a `resume` record marks where the
  // run picked up. The killed run logged the steps after it, which the
  // resumed run trains (and logs) again.
  void resumed(int64_t step);

 private:
  // The explored plan's measurements.
  struct Measured {
    double step = 0;     // the median of its timed steps
    double fastest = 0;  // the fastest of them
    double sync = 0;     // step − compute (median): the part the plan and the network set
    double time = 0;     // what the decision compares: `step`, or on its common base that base + `sync`
    int64_t steps = 0;   // timed steps
    bool stopped = false;  // stopped early by the race (explore_min_steps)
    CompressionStats stats;
    bool ok = false;
  };

  // Every step: the statistics, collectives and time split of the step just
  // synchronised, to the link's fit, the triggers and the follow-up.
  void observe(const StepMeasure& m);
  // Collective, every noise_every steps: the gradient noise scale of this
  // step's gradients (controller/GradientNoise.h), logged by rank 0.
  void measureNoiseScale(int64_t step);
  // A new plan or a decision: the running plan's steps, the triggers'
  // references and the soundings start over.
  void resetMeasurements();
  // A decision (collective): refit (LinkEstimator) → shortlist (rank 0
  // screens) → shareShortlist → exploreShortlist → chooseKnee (rank 0) →
  // adopt (broadcast, apply). ControllerDecision.cpp.
  struct Decision;
  void decide(int64_t step, const std::string& reason, ControlledLoop& loop);
  // Rank 0: screens the candidates (Screening) and picks those to explore
  // (d.exploreList, in knee order) and, at a network decision, the predicted
  // knee. ControllerShortlist.cpp.
  void shortlist(Decision& d);
  // Collective: rank 0's exploreList and predictedKnee to every rank.
  void shareShortlist(Decision& d);
  // Collective: each shortlisted plan races from an in-memory snapshot.
  void exploreShortlist(Decision& d, ControlledLoop& loop);
  // Rank 0: the knee of the measured points; the chosen plan's references.
  void chooseKnee(Decision& d);
  // Collective: the choice broadcast and applied, the trigger references and
  // the network backoff set.
  void adopt(Decision& d);
  // Collective, at provisional_step: the knee of the predicted front (no
  // exploration) replaces `initial` until the first decision if, predicted
  // explore_margin slower, it still would (Pareto.h couldReplace). When it
  // does and begin() kept a state, training rewinds to it (loop.restore())
  // and starts on the knee. Returns the seconds to charge to training time:
  // `spent` (this step's other controller work) plus its own, or with a
  // rewind every second since begin() (the restored clock predates them).
  double provisional(int64_t step, const StepMeasure& m, ControlledLoop& loop, double spent);
  // The provisional step is still to come: it is on (0 < provisional_step <
  // warmup_steps, not pinned) and has not run, nor has a decision.
  bool provisionalAhead() const;
  // Collective: `plan` for explore_steps steps (the first untimed). With
  // `race`, rank 0 stops it after explore_min_steps timed steps once its
  // fastest step and statistics so far could not replace `against` (the
  // knee of what the decision measured before it; Pareto.h couldReplace at
  // margin 0; an infinite `against` stops nothing).
  // `statFloor`: the candidate's screened statistical cost, below which its
  // few explored steps do not bring it (their residual is still building up).
  // The steps it ran go to undone.jsonl as undone from `step`.
  // `base` > 0: the decision's common base (common_base), on which the
  // race and `time` put the candidate's step − compute.
  Measured explore(int64_t step, const Plan& plan, ControlledLoop& loop, bool race, const Objectives& against,
                   double statFloor, double base);
  // Puts `large` on the controlled buckets from `step`; logged to plans.jsonl
  // unless `log` is false (a resumed run's plan, whose record the log holds).
  void applyPlan(const Plan& large, int64_t step, bool log = true);
  // Wire bits per coordinate of `plan` on `bucket` and its α-β coefficients
  // (into *out), from a fresh codec that has encoded the bucket once.
  double commCoefficientsFor(int bucket, const Plan& plan, comm::AlphaBetaSample* out);
  // `plan`'s index in candidates_; candidates_.size() when it is not one (pinned elsewhere).
  size_t indexOf(const Plan& plan) const;
  // Rank 0: the buckets' measuring geometry from geometry_ (see setGeometry).
  void refreshGeometry();

  ControllerOptions opts_;
  comm::Communicator& comm_;
  SyncedBuckets& sync_;
  std::vector<Candidate> candidates_;
  std::vector<int> large_;  // buckets the controller decides for
  Geometry geometry_;
  bool geometryRefreshed_ = false;
  comm::LocalCommunicator local_;  // sizing codecs (commCoefficientsFor)

  // The parts, each with its own state and contract.
  std::unique_ptr<DecisionLog> log_;      // decisions.jsonl, plans.jsonl, undone.jsonl
  std::unique_ptr<LinkEstimator> link_;   // α, β, the link's fit and the soundings
  std::unique_ptr<Triggers> triggers_;    // the phase, the drift triggers and the verdicts
  std::unique_ptr<RecentSteps> recent_;   // the running plan's steps since the last decision

  Plan active_;                                    // the large buckets' plan
  std::vector<comm::AlphaBetaSample> activeCoef_;  // its α-β coefficients per large bucket
  // Steps observed on the active plan since applyPlan (not reset by the
  // decisions that keep it; checkpointed).
  int64_t planSteps_ = 0;
  int64_t observedSteps_ = 0;  // steps observed since start()
  int64_t lastDecision_ = 0;
  int64_t decisions_ = 0;
  Followup followup_;  // the last decision's, over the steps after it
  // begin()'s training state for the provisional rewind, its step and when
  // it was taken.
  std::string rewindState_;
  int64_t rewindStep_ = 0;
  std::chrono::steady_clock::time_point rewindSince_;
  // The gradient noise scale's running estimate, its sample buffer, and the
  // samples per rank per step it needs (setBatch; 0: not measured).
  GradientNoise noise_;
  at::Tensor noiseBuffer_;
  int64_t batch_ = 0;
  // Rank 0's screening. Last, so that it is destroyed (its threads joined)
  // before the state they read.
  std::unique_ptr<Screening> screening_;
};

}  // namespace gradzip::trainer
