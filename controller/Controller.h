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
#pragma once

#include "comm/LinkFitter.h"
#include "comm/LocalCommunicator.h"
#include "controller/BandwidthSounding.h"
#include "controller/Candidates.h"
#include "controller/DriftDetector.h"
#include "controller/GradientNoise.h"
#include "sync/GradSync.h"
#include "controller/OverlapModel.h"
#include "controller/Triggers.h"
#include "controller/WorkAhead.h"

#include <nlohmann/json_fwd.hpp>
#include <torch/serialize/archive.h>

#include <chrono>
#include <cmath>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
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
  // The complete training state in memory, and putting it back exactly.
  virtual std::string snapshot() = 0;
  virtual void restore(const std::string& snapshot) = 0;
};

class Controller {
 public:
  // runDir: decisions.jsonl (rank 0) and rank<r>/plans.jsonl go there.
  Controller(ControllerOptions opts, comm::Communicator& comm, GradSync& sync, std::string runDir);
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

  const comm::NetworkParams& network() const { return net_; }
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
  struct Screened {
    double encodeDecode = 0, comm = 0, predicted = 0;
    double exposed = 0;  // the sync seconds predicted to show in the step (controller/OverlapModel.h)
    double bits = 0;  // wire bits per coordinate over the large buckets
    std::vector<double> bucketBits;          // per large bucket
    std::vector<double> bucketDownBits;      // per large bucket: a PS owner's downlink
    std::vector<double> bucketEncodeDecode;  // per large bucket
    // Without error feedback: the codec on the last gradient. With it: the
    // last of screen_reps replays of that gradient, the residual included,
    // an estimate of the steady state the plan runs in.
    CompressionStats stats;
    bool ok = false;
  };
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

  void observe(const StepMeasure& m);
  // Collective, every noise_every steps: the gradient noise scale of this
  // step's gradients (controller/GradientNoise.h), logged by rank 0.
  void measureNoiseScale(int64_t step);
  void resetMeasurements();
  // A decision (collective): refit → shortlist (rank 0 screens) → shareShortlist
  // → exploreShortlist → chooseKnee (rank 0) → adopt (broadcast, apply).
  struct Decision;
  void decide(int64_t step, const std::string& reason, ControlledLoop& loop);
  // α and β when the network moved, or β when the running plan's collectives
  // show the link slower than the model; logged in d.rec.
  void refit(Decision& d);
  // Rank 0: screens the candidates and picks those to explore (d.exploreList,
  // in knee order) and, at a network decision, the predicted knee.
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
  // The median of `v`'s latest entries: after a sharp change, only those of
  // its betaSteps_ steps.
  double latest(const std::vector<double>& v) const;
  // Rank 0: `plan`'s codec on each large bucket's last gradient: encode +
  // decode seconds, wire bits per bucket, statistics. An error-feedback codec
  // runs screen_reps replays of the last gradient with its residual and
  // measures the last call, whose input carries the residual built up: sparse
  // plans then show their steady-state vNMSE, not the fresh gradient's
  // (ablation, "Screening the steady state"), on the steadyStateBuckets().
  Screened screenCodec(const Plan& plan);
  // The large buckets an error-feedback codec's sequence runs on, in order:
  // up to kSteadyStateCoordinates (at least one bucket); the others get two
  // calls on their last gradient.
  std::vector<int> steadyStateBuckets() const;
  // Rank 0: screenCodec() of every compressor configuration (its collectives
  // share encode/decode), with predicted step base + the part of its
  // encode/decode and α-β communication that the buckets' pipeline behind
  // backward leaves exposed (controller/OverlapModel.h, with `timing`'s handovers
  // and per-bucket overheads); logs them (and the front) into rec.
  // Returns each candidate's (predicted step, statistical cost).
  // `byCodec` caches screenCodec() per compressor configuration: entries
  // already there are reused (the provisional step's, at the first decision),
  // missing ones are screened and added. With `onlyCompressor` set, only that
  // compressor's candidates are screened (a gain decision under gain_scope:
  // family, where no other can be chosen); the others stay unscreened, their
  // objectives infinite, logged with "screened": false.
  std::vector<Objectives> screenAll(double base, const OverlapTimings& timing, std::vector<Screened>& screened,
                                    nlohmann::json& rec,
                                    std::map<std::string, Screened>& byCodec, const std::string& onlyCompressor = "");
  // Rank 0: starts screenCodec() of every compressor configuration that
  // screenAll(byCodec, onlyCompressor) will need and byCodec lacks, on
  // `background` threads (WorkAhead; 0: none until screenAll), so that it
  // runs while this thread waits on the network. screenAll takes it over:
  // it works too, waits, and adds the results to byCodec. The
  // configurations' options are deep copies (yaml-cpp nodes share memory).
  void screenAhead(const std::map<std::string, Screened>& byCodec, const std::string& onlyCompressor, int background);
  // Collective, once, kStartBetaSteps steps after start(): β from those
  // steps' collectives, the fastest over them and over ranks (the first
  // steps carry start-up waits, and a slow outlier in two samples would be
  // half the median), or the full probe (α and β) where fewer than
  // kStartBetaSteps were well above their latency term. Logs the seconds it
  // took (its callers charge their own wall time, this included).
  void settleBeta(int64_t step);
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
  // Every rank: β from the running plan's latest collectives, the smallest
  // over ranks (observedBeta in ControllerDetail.h per rank, then MIN): the
  // last rank to reach a collective sees its wire time, the others also wait
  // for that rank, which on an oversubscribed host is most of the time. Rank
  // 0 then adopts it when slower than the model by more than `margin`
  // (relative); true (on rank 0) if it did.
  bool adoptObservedBeta(double margin);
  // Collective: observedBeta of the running plan's latest collectives, the
  // smallest over ranks (see adoptObservedBeta); +infinity where too few
  // of them were well above their latency term. At a decision a sharp
  // change called (betaSteps_ > 0): the collectives of those steps alone,
  // most of them well above their latency term.
  double observedBetaOfRanks();
  // Collective: the smallest `value` over ranks.
  double minOverRanks(double value);
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
  // Appends to this rank's undone.jsonl: `steps` steps after `step` ran
  // `plan` (a key) and were undone `by` exploration or the provisional rewind.
  void logUndone(int64_t step, const std::string& plan, int64_t steps, const char* by);
  // opts_.stat of `plan`'s statistics (statisticalCost), at least `floor`:
  // its screened cost, where the statistics come from steps run before its
  // error-feedback residual has built up (explored, or since the last decision).
  double statCost(const CompressionStats& s, const Plan& plan, double floor = 0) const;
  // Puts `large` on the controlled buckets from `step`; logged to plans.jsonl
  // unless `log` is false (a resumed run's plan, whose record the log holds).
  void applyPlan(const Plan& large, int64_t step, bool log = true);
  // A new codec for `plan` (screening and sizing run on their own, never on
  // GradSync's).
  std::unique_ptr<compress::Compressor> freshCodec(const Plan& plan) const;
  double commCoefficientsFor(int bucket, const Plan& plan, comm::AlphaBetaSample* out);
  int64_t broadcastInt(int64_t value);
  // `plan`'s index in candidates_; candidates_.size() when it is not one (pinned elsewhere).
  size_t indexOf(const Plan& plan) const;
  // Rank 0, at a check: the bytes of a bandwidth sounding due now, or 0 (none
  // due, the running plan's collectives are not latency-bound, or soundings
  // are off).
  int64_t soundingDue(int64_t step);
  // Collective: one timed all-reduce of `bytes`; rank 0 adds its β to
  // sounding_ and logs it with the seconds it took.
  void sound(int64_t step, int64_t bytes);
  // Collective: the seconds one all-reduce of `bytes` (float32 zeros) takes.
  double timedAllReduce(int64_t bytes);
  // Rank 0's verdict after the check at `step` (reason, sounding bytes, β
  // steps), broadcast without waiting; the next check acts on it.
  void sendVerdict(int64_t step);
  void writeDecision(const std::string& json);
  // Rank 0: GradSync's measuring geometry from geometry_ (see setGeometry).
  void refreshGeometry();

  ControllerOptions opts_;
  Geometry geometry_;
  bool geometryRefreshed_ = false;
  comm::Communicator& comm_;
  GradSync& sync_;
  std::string runDir_;
  std::vector<Candidate> candidates_;
  std::vector<int> large_;  // buckets the controller decides for
  comm::LocalCommunicator local_;

  Plan active_;             // the large buckets' plan
  std::vector<comm::AlphaBetaSample> activeCoef_;  // its α-β coefficients per large bucket
  comm::NetworkParams net_;
  comm::LinkFitter fitter_;
  DriftDetector netDrift_, gainDrift_, stepDrift_;
  std::vector<double> steps_;  // the last step times (median for stepDrift_)
  std::vector<double> syncs_;  // the last step − compute times
  double syncRef_ = 0;  // step − compute the last decision measured for its plan (its step: stepDrift_)
  Phase phase_ = Phase::Warmup;  // checkpointed (ControllerState decided, provisional_done)
  // The drift triggers (rank 0 evaluates them): the network's observed/
  // predicted ratio, the smoothed gain, and the step time against the one
  // the last decision measured for its plan (controller/Triggers.h).
  Trigger netTrigger_, gainTrigger_, stepTrigger_;
  int64_t changeSince_ = -1;  // rank 0: the check at which a network/step-time change was first seen
  bool severe_ = false;  // rank 0: step − compute has risen by kSevere of the step since the last decision
  bool sharp_ = false;   // rank 0: so has each of the last kSharpSteps steps', its collectives slower too (Controller.cpp)
  // Steps whose collectives alone give β at this decision (a sharp change,
  // before the medians moved; observedBetaOfRanks); 0: the last kRatioWindow.
  int64_t betaSteps_ = 0;
  std::vector<double> calibration_;  // observed/predicted ratios after a decision, before the reference is set
  bool drifting_ = false;  // the network detector has seen drift since the last decision
  int64_t gainSeen_ = 0;   // observations of the active plan's gain since it started
  // Steps observed on the active plan since applyPlan (not reset by the
  // decisions that keep it; checkpointed).
  int64_t planSteps_ = 0;
  int64_t networkBackoff_ = 1;  // network_interval multiplier after false alarms (decide)
  // rank 0: the last decision's trigger references are the running plan's
  // measured steps (it kept or explored the plan), not a prediction (decide).
  // Checkpointed, as networkBackoff_ is.
  bool measuredRefs_ = false;
  bool betaPending_ = false;    // β not measured yet since start() (settleBeta)
  // sparse_start_above: the steps before the provisional step run
  // sparse_start_plan, and settleBeta times all-reduces of this many bytes
  // (0: off, β from the steps' collectives). The same on every rank (start).
  int64_t sparseSoundBytes_ = 0;
  int64_t observedSteps_ = 0;   // steps observed since start()
  // The provisional step's screenings, reused by the first decision.
  std::map<std::string, Screened> provisionalScreens_;
  // Rank 0: the last screening of every candidate afresh and its step, which
  // network decisions within min_interval reuse (decide).
  std::map<std::string, Screened> lastScreens_;
  int64_t lastScreenStep_ = -1;
  // begin()'s training state for the provisional rewind, its step, when it
  // was taken, and the compressor states that existed then (GradSync::keepOnly:
  // the undone steps' plans leave no residual behind).
  std::string rewindState_;
  std::vector<std::vector<std::string>> rewindKeys_;
  int64_t rewindStep_ = 0;
  std::chrono::steady_clock::time_point rewindSince_;
  int64_t lastDecision_ = 0;
  int64_t decisions_ = 0;
  std::vector<StepMeasure> recent_;  // steps on the active plan since the last decision
  OverlapTimings recentTimings_;     // the buckets' timings over recent_ (addTimings)
  // Every bucket's handover, comm-thread seconds and encode + communicate +
  // decode of the step just synchronised, with its backward end, into `into`.
  void addTimings(OverlapTimings& into);
  struct {
    std::vector<double> handover, busy, work;
  } timingScratch_;  // addTimings' per-step buffers
  CompressionStats recentStats_;
  double recentComm_ = 0;      // Σ observed communication seconds over recent_
  double recentStep_ = 0;      // Σ step seconds over recent_
  std::vector<double> ratios_;  // the last observed/predicted communication ratios
  std::deque<comm::AlphaBetaSample> lastSamples_;  // the last observed collectives with their coefficients
  // The last decision's follow-up: its step, predicted and explored step
  // times, and the prediction's split into base (the step without the
  // training thread's wait for the sync after backward) and exposed sync,
  // NaN where the chosen point was not predicted (the running plan kept).
  // The measured steps are summed split the same way, so the log says which
  // part a prediction missed.
  struct Followup {
    int64_t step = -1;
    double predicted = 0, explored = 0, sum = 0;
    double predictedBase = NAN, predictedExposed = NAN;
    double sumBase = 0, sumExposed = 0;
    int64_t count = 0;
  } followup_;
  std::ofstream planLog_, undoneLog_;  // rank<r>/plans.jsonl, rank<r>/undone.jsonl
  uintmax_t planLogBytes_ = 0, undoneLogBytes_ = 0;  // their sizes when this process opened them
  // Bandwidth soundings (rank 0 decides and keeps the verdicts).
  BandwidthSounding sounding_;
  at::Tensor soundBuffer_;
  // The gradient noise scale's running estimate, its sample buffer, and the
  // samples per rank per step it needs (setBatch; 0: not measured).
  GradientNoise noise_;
  at::Tensor noiseBuffer_;
  int64_t batch_ = 0;
  int64_t lastSound_ = -1;    // step of the last sounding on this plan (-1: none yet)
  bool soundAgain_ = false;   // the last sounding was suspect: confirm at the next check
  bool soundTriggered_ = false;
  bool latencyBound_ = false;  // set by applyPlan: the plan moves less than half a sounding per step
  // The trigger check's verdict in flight (sendVerdict) and its handle.
  torch::Tensor verdict_;
  comm::Work verdictWork_;
  bool verdictPending_ = false;
  // Rank 0: the screening screenAhead started, which screenAll finishes.
  // Last, so that it is destroyed (its threads joined) before the state
  // they read.
  struct Screening {
    std::vector<Plan> plans;        // one per compressor configuration
    std::vector<Screened> results;  // results[i]: plans[i]'s screenCodec()
    std::unique_ptr<WorkAhead> work;
  };
  std::unique_ptr<Screening> screening_;
};

}  // namespace gradzip::trainer
