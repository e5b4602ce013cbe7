// Implements controller/Controller.h: construction, start-up (α, β), the plan in
// force, each step's bookkeeping and trigger check, and checkpointing. The
// parts keep their own state: controller/LinkEstimator.h (α, β, soundings),
// controller/Triggers.h (phase, drift triggers, verdicts),
// controller/Screening.h, controller/RecentSteps.h and
// controller/DecisionLog.h. A decision's steps are in
// controller/ControllerDecision.cpp and the files it names.
#include "controller/Controller.h"

#include "controller/ControllerDetail.h"
#include "controller/ControllerState.h"
#include "controller/DecisionLog.h"
#include "controller/LinkEstimator.h"
#include "controller/RecentSteps.h"
#include "controller/Screening.h"
#include "controller/Triggers.h"

#include "comm/CostModel.h"
#include "compress/Factory.h"
#include "compress/kernels/CounterRng.h"
#include "controller/Pareto.h"
#include "controller/PlanCost.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h

namespace {
// The buckets the controller decides for: those of at least small_bucket_kb,
// or every bucket where all are small (deciding for all rather than none).
std::vector<int> largeBuckets(const SyncedBuckets& sync, const ControllerOptions& opts) {
  std::vector<int> large;
  for (int k = 0; k < sync.numBuckets(); ++k)
    if (sync.bucketNumel(k) * 4 >= opts.smallBucketKb * 1024) large.push_back(k);
  if (large.empty())
    for (int k = 0; k < sync.numBuckets(); ++k) large.push_back(k);
  return large;
}
}  // namespace

Controller::Controller(ControllerOptions opts, comm::Communicator& comm, SyncedBuckets& sync, std::string runDir)
    : opts_(std::move(opts)),
      comm_(comm),
      sync_(sync),
      candidates_(makeCandidates(opts_)),
      large_(largeBuckets(sync_, opts_)),
      log_(std::make_unique<DecisionLog>(std::move(runDir), comm_.rank())),
      link_(std::make_unique<LinkEstimator>(opts_, comm_, *log_, large_.size())),
      triggers_(std::make_unique<Triggers>(opts_, comm_)),
      recent_(std::make_unique<RecentSteps>()),
      screening_(std::make_unique<Screening>(opts_, candidates_, large_, sync_, comm_.size())) {
  active_ = opts_.pin ? *opts_.pin : opts_.initial;
  spdlog::info("controller: {} candidate plans over {}; deciding for {} of {} buckets{}", candidates_.size(),
               fmt::join(opts_.families, ", "), large_.size(), sync_.numBuckets(),
               opts_.pin ? fmt::format(" (pinned to {})", opts_.pin->key()) : "");
}

Controller::~Controller() {
  // A run that ends by an exception may leave the last verdict in flight:
  // every rank issued it, so it completes, or the communicator's timeout
  // ends it (a peer gone); either way nothing is left to act on.
  try {
    finish();
  } catch (const std::exception& e) {
    spdlog::debug("controller: the last trigger verdict did not complete: {}", e.what());
  }
}

const comm::NetworkParams& Controller::network() const { return link_->network(); }

double Controller::commCoefficientsFor(int bucket, const Plan& plan, comm::AlphaBetaSample* out) {
  const int64_t d = sync_.bucketNumel(bucket);
  // A fresh codec that has encoded the bucket once: a shape-aware codec
  // sizes its payload from the bucket's layout. Without it PowerSGD would be
  // counted dense, and the network detector, seeing its collectives far
  // faster than predicted, would refit the link from them. Never the
  // buckets' own codec: sizing must leave training's state alone.
  const auto codec = plan.makeCompressor();
  try {
    const auto& x = sync_.lastInput(bucket).defined() ? sync_.lastInput(bucket) : sync_.bucketGradient(bucket);
    compress::Context ctx{local_, nullptr, plan.collective, sync_.bucketLayout(bucket), 0, bucket, 0, nullptr};
    codec->encode(x, ctx);
  } catch (const std::exception& e) {
    spdlog::debug("controller: sizing {} on bucket {} without its layout: {}", plan.key(), bucket, firstLine(e.what()));
  }
  const double bits = codec->bitsPerCoordinate(d, comm_.size());
  *out = planCoefficients(plan, bits, d, comm_.size(), codec->downlinkBitsPerCoordinate(d, comm_.size()));
  return bits;
}

double Controller::start(int64_t step) {
  const auto t0 = Clock::now();
  comm::NetworkParams probed;
  if (comm_.size() >= 2) probed = link_->probeAlpha();
  nlohmann::json rec{{"step", step},
                     {"event", "start"},
                     {"alpha", link_->network().alpha},
                     {"beta", nullptr},
                     {"world_size", comm_.size()},
                     {"candidates", candidates_.size()},
                     {"small_plan", opts_.smallPlan.key()}};
  std::string betaFrom = fmt::format("the collectives of steps {}-{}", step + 1, step + kStartBetaSteps);
  std::string sparseNote;  // the log line's account of a sparse start
  if (comm_.size() >= 2 && opts_.provisionalRewind && provisionalAhead() && step < opts_.provisionalStep) {
    // sparse_start_above: `initial`'s sync a step at the probe's α and β
    // (rank 0's; the probe's β may be NaN, which never exceeds it).
    double sync = 0;
    for (int k : large_) {
      comm::AlphaBetaSample c;
      commCoefficientsFor(k, active_, &c);
      sync += planSeconds(c, probed);
    }
    const int64_t bytes =
        comm_.rank() == 0 && sync > opts_.sparseStartAbove
            ? BandwidthSounding::bytesFor(1.0, kSparseSoundSeconds, probed.beta, comm_.size())
            : 0;
    link_->setSparseStart(broadcastInt(comm_, bytes));
    const int64_t sparseBytes = link_->sparseStartBytes();
    rec["initial_sync_predicted"] = sync;  // rank 0's, what sparse_start_above is compared with
    if (sparseBytes > 0) {
      rec["sparse_start"] = {{"plan", opts_.sparseStartPlan.key()},
                             {"probe_mbit", comm::bandwidthBitsPerSec(probed) / 1e6},
                             {"sounding_bytes", sparseBytes}};
      sparseNote = fmt::format(" (sparse start: {} would sync {:.2f} s a step at the probe's {:.1f} Mbit/s; the "
                               "steps before the provisional step run {})",
                               active_.key(), sync, comm::bandwidthBitsPerSec(probed) / 1e6,
                               opts_.sparseStartPlan.key());
      active_ = opts_.sparseStartPlan;
      betaFrom = fmt::format("{} all-reduces of {} KB at step {}", kSparseSoundings, sparseBytes / 1024,
                             step + kStartBetaSteps);
    }
  }
  applyPlan(active_, step);
  for (int k = 0; k < sync_.numBuckets(); ++k)
    if (std::find(large_.begin(), large_.end(), k) == large_.end()) sync_.setPlan(k, opts_.smallPlan);
  sync_.setMeasureCompression(true);
  rec["plan"] = active_.key();
  rec["beta_from"] = betaFrom;
  rec["seconds"] = since(t0);
  log_->write(rec);
  if (comm_.size() >= 2)
    spdlog::info("controller: probed α = {:.1f} µs in {:.2f} s; β from {}{}", link_->network().alpha * 1e6, since(t0),
                 betaFrom, sparseNote);
  return since(t0);
}

bool Controller::provisionalAhead() const {
  return !opts_.pin && triggers_->phase() == Phase::Warmup && opts_.provisionalStep > 0 &&
         opts_.provisionalStep < opts_.warmupSteps;
}

double Controller::begin(int64_t step, ControlledLoop& loop) {
  if (comm_.size() < 2 || !opts_.provisionalRewind || !provisionalAhead() || step >= opts_.provisionalStep) return 0;
  rewindSince_ = Clock::now();  // the snapshot is inside what a rewind charges
  rewindState_ = loop.snapshot();
  rewindStep_ = step;
  return since(rewindSince_);
}

void Controller::applyPlan(const Plan& large, int64_t step, bool log) {
  active_ = large;
  activeCoef_.clear();
  double bits = 0;  // wire bits per coordinate over the large buckets, as the model counts them
  int64_t total = 0;
  for (int k : large_) {
    sync_.setPlan(k, large);
    activeCoef_.emplace_back();
    bits += commCoefficientsFor(k, large, &activeCoef_.back()) * double(sync_.bucketNumel(k));
    total += sync_.bucketNumel(k);
  }
  double planBytes = 0;
  for (const auto& c : activeCoef_) planBytes += c.betaBytes;
  link_->planApplied(planBytes);
  if (log) log_->plan(step, large.key(), bits / double(std::max<int64_t>(1, total)));
  planSteps_ = 0;
  resetMeasurements();
}

void Controller::resetMeasurements() {
  recent_->clear();
  triggers_->measureAfresh();
  link_->resetSoundings();
}

void Controller::refreshGeometry() {
  if (comm_.rank() != 0 || opts_.geometry != "optimizer" || !geometry_) return;
  sync_.setStatScale(geometry_);
  geometryRefreshed_ = true;
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
    link_->observe(c);
    observed += bd.communicate;
    predicted += planSeconds(c, link_->network());
  }
  // recent_ holds the steps since the last decision (resetMeasurements).
  recent_->add(m, observed, stats, sync_);
  const CompressionStats& onPlan = recent_->stats();
  const double kept = double(std::max<size_t>(1, recent_->size()));
  Triggers::Observation o;
  o.step = m.step;
  o.compute = m.compute;
  o.observedComm = observed;
  o.predictedComm = predicted;
  o.gain = stats.inputSq > 0 ? stats.appliedSq / stats.inputSq : NAN;
  o.planGain = onPlan.inputSq > 0 ? onPlan.appliedSq / onPlan.inputSq : 0;
  o.meanStep = recent_->stepSeconds() / kept;
  o.meanComm = recent_->commSeconds() / kept;
  const auto seen = triggers_->observe(o);
  if (seen.driftBegan) link_->restartFit();
  // The follow-up counts the steps after the network trigger's calibration
  // (kCalibration steps on the new plan): the plan's own level by then.
  if (seen.watching && followup_.add(m.step, m.exposed, opts_.followupSteps))
    log_->write(followup_.record(active_.key()));
}

double Controller::afterStep(int64_t step, const StepMeasure& m, ControlledLoop& loop) {
  if (comm_.size() < 2) return 0;
  // Every second from here is charged: the bookkeeping and the trigger
  // check's broadcast (which also waits for rank 0) as well as β's settling,
  // soundings and decisions.
  const auto entry = Clock::now();
  observe(m);
  if (opts_.noiseEvery > 0 && !opts_.pin && batch_ > 0 && step >= opts_.warmupSteps && step % opts_.noiseEvery == 0)
    measureNoiseScale(step);
  // Adam's v̂ moves slowly (β₂ = 0.999): the geometry of the last refresh
  // serves the kGeometryEvery steps until the next one. The first refresh
  // follows the optimizer's first step.
  if (!geometryRefreshed_ || step % kGeometryEvery == 0) refreshGeometry();
  const bool provisionalNow = step == opts_.provisionalStep && provisionalAhead();
  if (link_->betaPending() && observedSteps_ >= kStartBetaSteps) {
    // Rank 0 starts the provisional step's screening on one thread while β
    // is measured: the sparse start's soundings wait on the link, and the
    // other core stays free for the ranks' network threads. After the geometry:
    // the screening reads its weights.
    if (provisionalNow && comm_.rank() == 0 && opts_.screenThreads >= 2) screening_->startProvisional(1);
    link_->settleBeta(step, observedSteps_);
  }
  if (provisionalNow) return provisional(step, m, loop, since(entry));
  if (step < opts_.warmupSteps || step % opts_.checkEvery != 0) return since(entry);
  // The trigger check is pipelined. Rank 0's verdict on the state after one
  // check travels (a 24-byte broadcast) while the steps up to the next check
  // train, and that check acts on it: a decision comes check_every steps
  // after the observations that call it, and no check waits for the slower
  // rank to finish its step; waiting for it at every step costs a share of
  // the step on a slow link (experiments/results/controller_ablation.md, "A
  // sparse start and a pipelined trigger check").
  const auto verdict = triggers_->receive();
  if (verdict.soundBytes > 0) link_->sound(step, verdict.soundBytes, active_.key());
  if (verdict.reason != kNone) decide(step, reasonName(verdict.reason), loop);
  // A sounding is due only once a decision has run, while the plan's steps
  // since then give its mean step.
  const bool soundable = comm_.rank() == 0 && !opts_.pin && triggers_->phase() == Phase::Decided && !recent_->empty();
  const int64_t soundBytes =
      soundable ? link_->soundingDue(step, recent_->stepSeconds() / double(recent_->size())) : 0;
  triggers_->send(step, lastDecision_, link_->soundTriggered(), soundBytes);
  return since(entry);
}

void Controller::measureNoiseScale(int64_t step) {
  std::vector<at::Tensor> local;  // this step's gradients before the sync, as screening reads them
  for (int k : large_) {
    if (!sync_.lastInput(k).defined()) return;  // (on every rank alike: all measure under the controller)
    local.push_back(sync_.lastInput(k));
  }
  if (local.empty()) return;
  const auto t0 = Clock::now();
  const auto e = measureNoise(comm_, local, batch_, compress::mix64(kNoiseSeed + uint64_t(step)), noiseBuffer_);
  const double seconds = since(t0);
  noise_.add(e);
  if (comm_.rank() != 0) return;
  log_->write({{"step", step},
               {"event", "noise"},
               {"batch", batch_},
               {"world_size", comm_.size()},
               {"samples", kNoiseSample},
               {"grad_sq", e.gradSq},
               {"trace", e.trace},
               {"b_simple", noise_.bSimple()},
               {"seconds", seconds}});
}

void Controller::finish() { triggers_->finish(); }

void Controller::save(torch::serialize::OutputArchive& ar) const {
  ControllerState st;
  st.plan = active_.key();
  st.lastDecision = lastDecision_;
  st.decisions = decisions_;
  st.alpha = link_->network().alpha;
  st.beta = link_->network().beta;
  // Without the step-time references a resumed run would not watch its step
  // time until the next decision; without the steps on the plan, the
  // measured-references flag and the backoff it would price its running plan
  // at the screened floor for min_interval more steps and wait out
  // network_interval on a slowdown it would have acted on at once.
  triggers_->save(st);
  st.planSteps = planSteps_;
  st.noise = noise_.sums();
  st.save(ar);
}

void Controller::resumed(int64_t step) { log_->resumed(step, active_.key()); }

void Controller::load(torch::serialize::InputArchive& ar) {
  const auto st = ControllerState::load(ar);
  const Plan plan = planFromKey(st.plan);
  GZ_CHECK(indexOf(plan) < candidates_.size() || plan == opts_.initial || plan == opts_.sparseStartPlan ||
               (opts_.pin && plan == *opts_.pin),
           "checkpoint: controller plan {} is none this config's controller runs (a candidate, initial {} or "
           "sparse_start_plan {})",
           plan.key(), opts_.initial.key(), opts_.sparseStartPlan.key());
  // The phase, the step-time references, the measured-references flag and
  // the backoff; α and β are kept for the record: start() probed α as the
  // network is now, and β follows from the first steps after the resume
  // (settleBeta).
  triggers_->load(st);
  lastDecision_ = st.lastDecision;
  decisions_ = st.decisions;
  noise_.restore(st.noise);
  // Not logged: plans.jsonl holds the record of this plan from when it was
  // applied (resumed() trims the log to the resume step).
  if (!opts_.pin && !(plan == active_)) applyPlan(plan, lastDecision_, false);
  // After applyPlan, which starts the count afresh; pinned runs too (their
  // decisions keep the pin, with these references and back-off).
  planSteps_ = st.planSteps;
  if (opts_.pin) return;
  // A checkpoint is past the provisional step (mayRewind): no sparse start
  // to measure for, β from the resumed plan's collectives (settleBeta).
  if (triggers_->phase() != Phase::Warmup) link_->setSparseStart(0);
}

}  // namespace gradzip::trainer
