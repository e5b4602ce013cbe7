// Implements controller/Controller.h: construction, start-up (α, β), the plan in
// force, each step's bookkeeping, and checkpointing. The triggers are in
// controller/ControllerTriggers.cpp; the decision's steps in
// controller/ControllerDecision.cpp and the files it names.
#include "controller/Controller.h"

#include "controller/ControllerDetail.h"
#include "controller/ControllerState.h"

#include "comm/CostModel.h"
#include "comm/NetworkProbe.h"
#include "compress/CounterRng.h"
#include "compress/Factory.h"
#include "controller/Pareto.h"
#include "controller/PlanCost.h"
#include "util/RunLogs.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <tuple>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h

Controller::Controller(ControllerOptions opts, comm::Communicator& comm, GradSync& sync, std::string runDir)
    : opts_(std::move(opts)),
      comm_(comm),
      sync_(sync),
      runDir_(std::move(runDir)),
      candidates_(makeCandidates(opts_)),
      netDrift_(opts_.networkDrift, kSmoothing, kCalibration),
      gainDrift_(opts_.gainDrift, kSmoothing, kCalibration),
      stepDrift_(opts_.networkDrift, kSmoothing, kCalibration),
      sounding_(2 * opts_.networkDrift) {
  for (int k = 0; k < sync_.numBuckets(); ++k)
    if (sync_.bucketNumel(k) * 4 >= opts_.smallBucketKb * 1024) large_.push_back(k);
  if (large_.empty()) {
    // Every bucket is small: decide for all of them rather than for none.
    for (int k = 0; k < sync_.numBuckets(); ++k) large_.push_back(k);
  }
  active_ = opts_.pin ? *opts_.pin : opts_.initial;
  const std::string dir = fmt::format("{}/rank{}", runDir_, comm_.rank());
  std::filesystem::create_directories(dir);
  // What the logs held before this process (a resumed run's earlier part):
  // resumed() drops what start() wrote since, which repeats it.
  for (auto [log, name, size] : {std::tuple{&planLog_, "plans", &planLogBytes_},
                                 std::tuple{&undoneLog_, "undone", &undoneLogBytes_}}) {
    const std::string path = fmt::format("{}/{}.jsonl", dir, name);
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    *size = ec ? 0 : bytes;
    log->open(path, std::ios::app);
    GZ_CHECK(log->good(), "cannot write {}", path);
  }
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

std::unique_ptr<compress::Compressor> Controller::freshCodec(const Plan& plan) const {
  return plan.makeCompressor();
}

double Controller::commCoefficientsFor(int bucket, const Plan& plan, comm::AlphaBetaSample* out) {
  const int64_t d = sync_.bucketNumel(bucket);
  // A fresh codec that has encoded the bucket once: a shape-aware codec
  // sizes its payload from the bucket's layout. Without it PowerSGD would be
  // counted dense, and the network detector, seeing its collectives far
  // faster than predicted, would refit the link from them.
  const auto codec = freshCodec(plan);
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

int64_t Controller::broadcastInt(int64_t value) {
  auto t = torch::full({1}, value, torch::kLong);
  comm_.broadcast(t, 0).wait();
  return t.item<int64_t>();
}

void Controller::writeDecision(const std::string& json) {
  if (comm_.rank() != 0) return;
  std::ofstream f(runDir_ + "/decisions.jsonl", std::ios::app);
  f << json << "\n";
  GZ_CHECK(f.good(), "cannot append to {}/decisions.jsonl", runDir_);
}

double Controller::start(int64_t step) {
  const auto t0 = Clock::now();
  comm::NetworkParams probed;
  if (comm_.size() >= 2) {
    // α only: β from the first steps' collectives (settleBeta). The full
    // probe's megabyte round trips take seconds on a slow link; the initial
    // plan's collectives measure the link for free, and a token-bucket shaper
    // lets the probe's messages through at line rate up to its burst anyway.
    net_ = probed = comm::probe(comm_, quickProbe(opts_.probe));
    net_.beta = NAN;
    betaPending_ = true;
  }
  nlohmann::json rec{{"step", step},
                     {"event", "start"},
                     {"alpha", net_.alpha},
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
    sparseSoundBytes_ = broadcastInt(bytes);
    rec["initial_sync_predicted"] = sync;  // rank 0's, what sparse_start_above is compared with
    if (sparseSoundBytes_ > 0) {
      rec["sparse_start"] = {{"plan", opts_.sparseStartPlan.key()},
                             {"probe_mbit", comm::bandwidthBitsPerSec(probed) / 1e6},
                             {"sounding_bytes", sparseSoundBytes_}};
      sparseNote = fmt::format(" (sparse start: {} would sync {:.2f} s a step at the probe's {:.1f} Mbit/s; the "
                               "steps before the provisional step run {})",
                               active_.key(), sync, comm::bandwidthBitsPerSec(probed) / 1e6,
                               opts_.sparseStartPlan.key());
      active_ = opts_.sparseStartPlan;
      betaFrom = fmt::format("{} all-reduces of {} KB at step {}", kSparseSoundings, sparseSoundBytes_ / 1024,
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
  writeDecision(rec.dump());
  if (comm_.size() >= 2)
    spdlog::info("controller: probed α = {:.1f} µs in {:.2f} s; β from {}{}", net_.alpha * 1e6, since(t0), betaFrom,
                 sparseNote);
  return since(t0);
}

bool Controller::provisionalAhead() const {
  return !opts_.pin && phase_ == Phase::Warmup && opts_.provisionalStep > 0 &&
         opts_.provisionalStep < opts_.warmupSteps;
}

double Controller::begin(int64_t step, ControlledLoop& loop) {
  if (comm_.size() < 2 || !opts_.provisionalRewind || !provisionalAhead() || step >= opts_.provisionalStep) return 0;
  rewindSince_ = Clock::now();  // the snapshot is inside what a rewind charges
  rewindState_ = loop.snapshot();
  rewindKeys_ = sync_.compressorKeys();
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
  // Latency-bound: the plan's collectives move less than half a sounding a
  // step, so on a shaped link they may fit in the token bucket's burst and
  // not show its rate. Denser plans' collectives do, through the ratio
  // detector (which keeps watching latency-bound plans too).
  double planBytes = 0;
  for (const auto& c : activeCoef_) planBytes += c.betaBytes;
  latencyBound_ = planBytes < 0.5 * double(BandwidthSounding::periodicBytes(comm_.size()));
  if (log) {
    planLog_ << nlohmann::json{{"step", step}, {"plan", large.key()}, {"bits", bits / double(std::max<int64_t>(1, total))}}
                    .dump()
             << "\n";
    planLog_.flush();
  }
  planSteps_ = 0;
  resetMeasurements();
}

void Controller::logUndone(int64_t step, const std::string& plan, int64_t steps, const char* by) {
  if (steps <= 0) return;
  undoneLog_ << nlohmann::json{{"step", step}, {"plan", plan}, {"steps", steps}, {"by", by}}.dump() << "\n";
  undoneLog_.flush();
}

void Controller::addTimings(OverlapTimings& into) {
  // Every step: the scratch vectors keep their capacity (no allocation).
  auto& [handover, busy, work] = timingScratch_;
  handover.clear();
  busy.clear();
  work.clear();
  for (int k = 0; k < sync_.numBuckets(); ++k) {
    const auto& bd = sync_.lastBreakdown(k);
    handover.push_back(bd.handover);
    busy.push_back(bd.busy);
    work.push_back(bd.encode + bd.communicate + bd.decode);
  }
  into.add(handover, busy, work, sync_.lastBackwardEnd());
}

double Controller::statCost(const CompressionStats& s, const Plan& plan, double floor) const {
  if (!(s.inputSq > 0)) return INFINITY;
  return std::max(floor, statisticalCost(opts_, plan, s.errorSq / s.inputSq, s.appliedSq / s.inputSq));
}

void Controller::refreshGeometry() {
  if (comm_.rank() != 0 || opts_.geometry != "optimizer" || !geometry_) return;
  sync_.setStatScale(geometry_);
  geometryRefreshed_ = true;
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
  if (betaPending_ && observedSteps_ >= kStartBetaSteps) {
    // Rank 0 starts the provisional step's screening on one thread while β
    // is measured: the sparse start's soundings wait on the link, and the
    // other core stays free for the ranks' network threads. After the geometry:
    // the screening reads its weights.
    if (provisionalNow && comm_.rank() == 0 && opts_.screenThreads >= 2) {
      provisionalScreens_.clear();
      screenAhead(provisionalScreens_, "", 1);
    }
    settleBeta(step);
  }
  if (provisionalNow) return provisional(step, m, loop, since(entry));
  if (step < opts_.warmupSteps || step % opts_.checkEvery != 0) return since(entry);
  // The trigger check is pipelined. Rank 0's verdict on the state after one
  // check travels (a 24-byte broadcast) while the steps up to the next check
  // train, and that check acts on it: a decision comes check_every steps
  // after the observations that call it, and no check waits for the slower
  // rank to finish its step; waiting for it at every step costs a share of
  // the step on a slow link (experiments/results/controller_ablation.md, "A
  // sparse start and a pipelined trigger check"). The first decision needs no verdict: every
  // rank knows it is due.
  int64_t reason = kNone, soundBytes = 0;
  if (verdictPending_) {
    verdictWork_.wait();
    verdictPending_ = false;
    const int64_t* v = verdict_.data_ptr<int64_t>();
    reason = v[0];
    soundBytes = v[1];
    betaSteps_ = v[2];
  }
  if (phase_ != Phase::Decided) reason = kInitial;
  if (soundBytes > 0) sound(step, soundBytes);
  if (reason != kNone) decide(step, reasonName(reason), loop);
  sendVerdict(step);
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
  writeDecision(nlohmann::json{{"step", step},
                               {"event", "noise"},
                               {"batch", batch_},
                               {"world_size", comm_.size()},
                               {"samples", kNoiseSample},
                               {"grad_sq", e.gradSq},
                               {"trace", e.trace},
                               {"b_simple", noise_.bSimple()},
                               {"seconds", seconds}}
                    .dump());
}

void Controller::finish() {
  if (!verdictPending_) return;
  verdictPending_ = false;
  verdictWork_.wait();
}

void Controller::save(torch::serialize::OutputArchive& ar) const {
  ControllerState st;
  st.plan = active_.key();
  st.decided = phase_ == Phase::Decided;
  st.lastDecision = lastDecision_;
  st.decisions = decisions_;
  st.alpha = net_.alpha;
  st.beta = net_.beta;
  st.provisionalDone = phase_ != Phase::Warmup;
  // Without the step-time references a resumed run would not watch its step
  // time until the next decision; without the steps on the plan, the
  // measured-references flag and the backoff it would price its running plan
  // at the screened floor for min_interval more steps and wait out
  // network_interval on a slowdown it would have acted on at once.
  st.stepArmed = stepTrigger_.watching();
  st.stepReference = stepDrift_.reference();
  st.syncReference = syncRef_;
  st.planSteps = planSteps_;
  st.measuredRefs = measuredRefs_;
  st.networkBackoff = networkBackoff_;
  st.noise = noise_.sums();
  st.save(ar);
}

void Controller::resumed(int64_t step) {
  for (auto [log, name, size] : {std::tuple{&planLog_, "plans", planLogBytes_},
                                 std::tuple{&undoneLog_, "undone", undoneLogBytes_}}) {
    const std::string path = fmt::format("{}/rank{}/{}.jsonl", runDir_, comm_.rank(), name);
    log->close();
    // start()'s records (the start's plan at step 0, again) are the earlier
    // part's; the plan the checkpoint restores has its record there too.
    std::filesystem::resize_file(path, size);
    keepJsonLinesThrough(path, step);
    log->open(path, std::ios::app);
    GZ_CHECK(log->good(), "cannot write {}", path);
  }
  if (comm_.rank() != 0) return;
  keepJsonLinesThrough(runDir_ + "/decisions.jsonl", step);
  writeDecision(nlohmann::json{{"step", step}, {"event", "resume"}, {"plan", active_.key()}}.dump());
}

void Controller::load(torch::serialize::InputArchive& ar) {
  const auto st = ControllerState::load(ar);
  const Plan plan = planFromKey(st.plan);
  GZ_CHECK(indexOf(plan) < candidates_.size() || plan == opts_.initial || plan == opts_.sparseStartPlan ||
               (opts_.pin && plan == *opts_.pin),
           "checkpoint: controller plan {} is none this config's controller runs (a candidate, initial {} or "
           "sparse_start_plan {})",
           plan.key(), opts_.initial.key(), opts_.sparseStartPlan.key());
  phase_ = st.decided ? Phase::Decided : st.provisionalDone ? Phase::Provisional : Phase::Warmup;
  lastDecision_ = st.lastDecision;
  decisions_ = st.decisions;
  // α and β are kept for the record: start() probed α as the network is
  // now, and β follows from the first steps after the resume (settleBeta).
  if (st.stepArmed && st.stepReference > 0) {
    stepDrift_.reset(st.stepReference);
    syncRef_ = st.syncReference;
    stepTrigger_.calibrated();
  }
  noise_.restore(st.noise);
  // Not logged: plans.jsonl holds the record of this plan from when it was
  // applied (resumed() trims the log to the resume step).
  if (!opts_.pin && !(plan == active_)) applyPlan(plan, lastDecision_, false);
  // After applyPlan, which starts the count afresh; pinned runs too (their
  // decisions keep the pin, with these references and back-off).
  planSteps_ = st.planSteps;
  measuredRefs_ = st.measuredRefs;
  networkBackoff_ = st.networkBackoff;
  if (opts_.pin) return;
  // A checkpoint is past the provisional step (mayRewind): no sparse start
  // to measure for, β from the resumed plan's collectives (settleBeta).
  if (phase_ != Phase::Warmup) sparseSoundBytes_ = 0;
}

}  // namespace gradzip::trainer
