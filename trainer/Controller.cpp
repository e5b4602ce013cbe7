// Implements trainer/Controller.h: construction, the plan in force, the
// per-step measurements and the triggers that call a decision, checkpointing.
// The decision itself (refit, screening, exploration, knee) is in
// trainer/ControllerDecision.cpp.
#include "trainer/Controller.h"

#include "trainer/ControllerDetail.h"

#include "comm/CostModel.h"
#include "comm/NetworkProbe.h"
#include "compress/CounterRng.h"
#include "compress/Factory.h"
#include "trainer/Pareto.h"
#include "trainer/PlanCost.h"
#include "trainer/RunLogs.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <tuple>

namespace gradzip::trainer {
using namespace detail;  // trainer/ControllerDetail.h
namespace {
// Observations after a decision whose median becomes a detector's reference:
// the new plan's own level, not the model's (the α-β model of a ping-pong
// probe predicts c10d's collectives only up to a constant factor).
constexpr size_t kCalibration = 10;
constexpr int64_t kGainSettle = 50;  // steps on a plan before its gain becomes the reference
constexpr double kSmoothing = 0.1;  // weight of a new observation in the drift averages
constexpr size_t kRecentCap = 1000;  // steps kept since a decision (recent_); bounds recheck_steps
// A drift only counts when it moves the communication time by at least
// kMinImpact of the step time: a network change the step does not feel is not
// worth re-deciding for (the window it is the median of: kRatioWindow,
// trainer/ControllerDetail.h).
constexpr double kMinImpact = 0.10;
constexpr int64_t kPersist = int64_t(kRatioWindow / 2 + 1);  // steps a network change must persist (afterStep)
// A change that has raised the median step − compute by at least this share
// of the step the last decision measured is acted on at once (afterStep).
constexpr double kSevere = 0.30;
// A sharp change: in each of the last kSharpSteps steps step − compute has
// risen by kSevere of the step and the observed/predicted communication
// ratio by a factor 1 + 2·network_drift over its reference (against the
// medians of kRatioWindow, which move only after kRatioWindow/2 + 1 of
// them). Acted on at once (afterStep): on schedule_c1 each fp16 step at 20
// Mbit/s costs ~0.23 s more than TopKC b=2's, and fp16 ran 6-8 of them
// (from the change at step ~117-119) until the median-based decision at
// 125. The ratio keeps a host's hiccup out: three unshaped fp16 steps
// 0.235 s long instead of 0.16, their collectives no slower, called a
// decision without it (schedule_c1 seed 1). 2, not 3: each step of the wait
// is a step of the old plan on the slow link; on schedule_c1 seeds 1-12
// (interleaved with 3 and topk33, experiments/results/controller_ablation.md,
// "Two sharp steps, and prompt slowdowns ...") 2 reached 0.83 in 0.92x the time of 3 (most of it a
// change of path: 0.96x the steps), and in 36 runs of 2 one decision on an
// unchanged link was sharp (after the target; it kept its plan, 0.03 s).
constexpr size_t kSharpSteps = 2;
// Steps between refreshes of the measuring geometry (refreshGeometry): a
// per-tensor pass over Adam's v̂, which moves slowly, so not every check.
constexpr int64_t kGeometryEvery = 5;
// The gradient noise scale's sample stream: seeded by this and the step.
constexpr uint64_t kNoiseSeed = 0x6e6f697365ULL;

enum Reason : int64_t { kNone = 0, kInitial = 1, kNetwork = 2, kGain = 3, kStepTime = 4, kSounding = 5, kCost = 6 };
const char* reasonName(int64_t r) {
  switch (r) {
    case kInitial: return "initial";
    case kNetwork: return "network";
    case kGain: return "gain";
    case kStepTime: return "step_time";
    case kSounding: return "sounding";
    case kCost: return "cost";
    default: return "none";
  }
}
}  // namespace

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
  // sizes its payload from the bucket's layout. Without it PowerSGD
  // counted every coordinate dense (32 bits, 30x its wire bytes on
  // ResNet-20): the network detector then saw its collectives 30x faster
  // than predicted and refitted the link from them (schedule_c1, 0d4d379
  // seed 3: 90 Mbit/s on a 5 Mbit/s link).
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
    // probe took 2.3-4.1 s on 20-200 Mbit/s links (its 1 and 4 MB round
    // trips), on top of the steps; the initial plan's collectives measure the
    // link for free, and a token-bucket shaper lets the probe's messages
    // through at line rate up to its burst anyway.
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
  return !opts_.pin && !decided_ && !provisionalDone_ && opts_.provisionalStep > 0 &&
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

void Controller::resetMeasurements() {
  recent_.clear();
  recentTimings_.clear();
  recentStats_ = {};
  recentComm_ = recentStep_ = 0;
  ratios_.clear();
  calibration_.clear();
  netArmed_ = gainArmed_ = netTriggered_ = gainTriggered_ = drifting_ = stepTriggered_ = severe_ = sharp_ = false;
  gainSeen_ = 0;
  changeSince_ = -1;
  // The time the model the plan was chosen under gives a sounding (none while
  // β is still being measured at the start): a first sounding much faster
  // than that finds a link that changed under the decision.
  const bool modelled = std::isfinite(net_.alpha) && std::isfinite(net_.beta) && net_.alpha >= 0 && net_.beta >= 0;
  sounding_.reset(modelled ? comm::ringAllReduceCost(double(BandwidthSounding::periodicBytes(comm_.size())),
                                                     comm_.size(), net_)
                           : 0.0);
  lastSound_ = -1;
  soundAgain_ = soundTriggered_ = false;
  steps_.clear();
  syncs_.clear();
}

double Controller::statCost(const CompressionStats& s, const Plan& plan, double floor) const {
  if (!(s.inputSq > 0)) return INFINITY;
  return std::max(floor, statisticalCost(opts_, plan, s.errorSq / s.inputSq, s.appliedSq / s.inputSq));
}

void Controller::settleBeta(int64_t step) {
  const auto t0 = Clock::now();
  betaPending_ = false;
  std::string from;
  if (sparseSoundBytes_ > 0) {
    // sparse_start: the steps' collectives are latency-bound; timed
    // all-reduces sized at start() give β (the fastest of them: a busy host
    // only slows one down), the lowest over the ranks as below.
    double fastest = INFINITY;
    for (int i = 0; i < kSparseSoundings; ++i) fastest = std::min(fastest, timedAllReduce(sparseSoundBytes_));
    net_.beta = minOverRanks(BandwidthSounding::betaOf(fastest, sparseSoundBytes_, comm_.size(), net_.alpha));
    from = fmt::format("{} all-reduces of {} KB (sparse start), the fastest {:.3f} s", kSparseSoundings,
                       sparseSoundBytes_ / 1024, fastest);
    sparseSoundBytes_ = 0;
  } else {
    const auto betas = usableBetas(lastSamples_, net_.alpha);
    const double observed = minOverRanks(int64_t(betas.size()) >= kStartBetaSteps
                                             ? *std::min_element(betas.begin(), betas.end())
                                             : INFINITY);
    if (std::isfinite(observed)) {
      net_.beta = observed;
      from = fmt::format("the collectives of the {} steps since start", observedSteps_);
    } else {
      net_ = comm::probe(comm_, opts_.probe);
      from = "the probe (the first steps' collectives were too close to their latency term to give β)";
    }
  }
  const double seconds = since(t0);
  spdlog::info("controller: step {}: α = {:.1f} µs, bandwidth {:.1f} Mbit/s (β from {}) in {:.2f} s", step,
               net_.alpha * 1e6, comm::bandwidthBitsPerSec(net_) / 1e6, from, seconds);
  writeDecision(nlohmann::json{{"step", step},
                               {"event", "beta"},
                               {"alpha", net_.alpha},
                               {"beta", net_.beta},
                               {"from", from},
                               {"seconds", seconds}}
                    .dump());
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
    fitter_.add(c);
    lastSamples_.push_back(c);
    if (lastSamples_.size() > kRatioWindow) lastSamples_.pop_front();
    observed += bd.communicate;
    predicted += planSeconds(c, net_);
  }
  if (recent_.size() < kRecentCap) {
    recent_.push_back(m);
    addTimings(recentTimings_);
    recentComm_ += observed;
    recentStep_ += m.step;
  }
  steps_.push_back(m.step);
  if (steps_.size() > kRatioWindow) steps_.erase(steps_.begin());
  syncs_.push_back(std::max(0.0, m.step - m.compute));
  if (syncs_.size() > kRatioWindow) syncs_.erase(syncs_.begin());
  recentStats_ += stats;
  // recent_ holds the steps since the last decision (resetMeasurements).
  if (recheckDue_ && 2 * int64_t(recent_.size()) > opts_.recheckSteps) recheckStats_ += stats;
  const double gain = stats.inputSq > 0 ? stats.appliedSq / stats.inputSq : NAN;
  const double ratio = predicted > 0 ? observed / predicted : NAN;
  // Calibrate the references on the first observations of a plan, then
  // watch. The gain of an error-feedback compressor keeps moving while its
  // residual builds up after a switch, so its reference waits longer.
  if (!gainArmed_ && ++gainSeen_ >= kGainSettle) {
    const double g = recentStats_.inputSq > 0 ? recentStats_.appliedSq / recentStats_.inputSq : 0;
    if (g > 0) {
      gainDrift_.reset(g);
      gainArmed_ = true;
    }
  }
  if (!netArmed_) {
    if (std::isfinite(ratio) && ratio > 0) calibration_.push_back(ratio);
    if (calibration_.size() == kCalibration) {
      netDrift_.reset(median(calibration_));
      netArmed_ = true;
    }
    return;
  }
  if (std::isfinite(ratio) && ratio > 0) {
    ratios_.push_back(ratio);
    if (ratios_.size() > kRatioWindow) ratios_.erase(ratios_.begin());
  }
  const bool drift = !ratios_.empty() && netDrift_.update(median(ratios_));
  // The refit at the next decision should see the network as it is now: its
  // window starts where the drift does.
  if (drift && !drifting_) {
    fitter_.clear();
    drifting_ = true;
  }
  const double kept = double(std::max<size_t>(1, recent_.size()));
  const double meanStep = recentStep_ / kept, meanComm = recentComm_ / kept;
  // The detector above sees changes against its reference. A model that was
  // already wrong when the reference was taken (a decision made while the
  // link was changing) shows in the reference itself: observed/predicted
  // outside [1/(1 + 2·drift), 1 + 2·drift], with the mispredicted part at
  // least kMinImpact of the step. Without this the controller would run a
  // plan chosen for the old link until the gain trigger.
  const double ref = netDrift_.reference(), bound = 1 + 2 * opts_.networkDrift;
  const bool mismatch = (ref > bound || ref < 1 / bound) && std::abs(1 - 1 / ref) * meanComm >= kMinImpact * meanStep;
  netTriggered_ = (drift && netDrift_.change() * meanComm >= kMinImpact * meanStep) || mismatch;
  // The step time against the one the last decision measured for its plan: a
  // network change the ratio detector calibrated itself into (it happened
  // right after a decision) still shows here.
  // Only a change the synchronisation explains (step − compute moves at
  // least half as much, the same way) counts: a host whose compute slowed
  // down (load from other processes) is not a reason to re-explore plans.
  const double stepNow = median(steps_), dStep = stepNow - stepDrift_.reference(), dSync = median(syncs_) - syncRef_;
  stepTriggered_ = stepArmed_ && stepDrift_.update(stepNow) && dSync * dStep > 0 &&
                   std::abs(dSync) >= 0.5 * std::abs(dStep);
  severe_ = stepArmed_ && dSync >= kSevere * stepDrift_.reference();
  sharp_ = stepArmed_ && syncs_.size() >= kSharpSteps && ratios_.size() >= kSharpSteps &&
           *std::min_element(syncs_.end() - kSharpSteps, syncs_.end()) - syncRef_ >= kSevere * stepDrift_.reference() &&
           *std::min_element(ratios_.end() - kSharpSteps, ratios_.end()) >=
               netDrift_.reference() * (1 + 2 * opts_.networkDrift);
  spdlog::debug("controller: comm observed {:.3g} s, predicted {:.3g} s (ratio median {:.3g}, smoothed {:.3g}, "
                "reference {:.3g}); gain {:.4g}{}{}",
                observed, predicted, ratios_.empty() ? NAN : median(ratios_), netDrift_.smoothed(),
                netDrift_.reference(), gain, netTriggered_ ? "; network changed" : "",
                gainTriggered_ ? "; gain drifted" : "");
  gainTriggered_ = gainArmed_ && gainDrift_.update(gain);
  if (followup_.step >= 0 && followup_.count < opts_.followupSteps) {
    followup_.sum += m.step;
    followup_.sumBase += m.step - m.exposed;
    followup_.sumExposed += m.exposed;
    if (++followup_.count == opts_.followupSteps) {
      const double n = double(followup_.count), measured = followup_.sum / n;
      nlohmann::json rec{{"event", "followup"},
                         {"decision_step", followup_.step},
                         {"plan", active_.key()},
                         {"predicted_step", followup_.predicted},
                         {"explored_step", followup_.explored},
                         {"measured_step", measured},
                         {"prediction_error", (followup_.predicted - measured) / measured},
                         {"measured_base", followup_.sumBase / n},
                         {"measured_exposed", followup_.sumExposed / n}};
      if (std::isfinite(followup_.predictedBase)) {
        rec["predicted_base"] = followup_.predictedBase;
        rec["predicted_exposed"] = followup_.predictedExposed;
      }
      writeDecision(rec.dump());
    }
  }
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
  keepGradient();
  if (opts_.noiseEvery > 0 && !opts_.pin && batch_ > 0 && step >= opts_.warmupSteps && step % opts_.noiseEvery == 0)
    measureNoiseScale(step);
  // Adam's v̂ moves slowly (β₂ = 0.999): the geometry of the last refresh
  // serves the kGeometryEvery steps until the next one. The first refresh
  // follows the optimizer's first step.
  if (!geometryRefreshed_ || step % kGeometryEvery == 0) refreshGeometry();
  const bool provisionalNow = step == opts_.provisionalStep && provisionalAhead();
  if (betaPending_ && observedSteps_ >= kStartBetaSteps) {
    // Rank 0 starts the provisional step's screening on one thread while β
    // is measured: the sparse start's soundings wait on the link (0.20 s at
    // 20 Mbit/s, where the screening then took 0.15 s more), and the other
    // core stays free for the ranks' network threads. After the geometry:
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
  // rank to finish its step. Waiting for it at every step (the broadcast done
  // at once) cost 1.2 ms a step on the unshaped loopback and 6.5 ms (3%) on a
  // 10 Mbit/s link, against 0.1 ms with a check every 10 steps
  // (experiments/results/controller_ablation.md, "A sparse start and a
  // pipelined trigger check"). The first decision needs no verdict: every
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
  if (!decided_) reason = kInitial;
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

void Controller::sendVerdict(int64_t step) {
  int64_t reason = kNone, soundBytes = 0, betaSteps = 0;
  if (comm_.rank() == 0) {
    // A network or step-time change must persist for kPersist steps before
    // it is acted on: the detectors see it once the median of their
    // kRatioWindow observations has moved (kRatioWindow/2 + 1 of them), and
    // kPersist steps later every observation in the window (β from the
    // running plan's collectives, its step time) sees the new network, not a
    // mix, and a burst of noise has passed. It used to be kRatioWindow
    // steps, at checks every 10 steps: 23-26 steps from a slowdown to the
    // decision on schedule_c1, ~0.25 s a step too slow on fp16.
    // A severe change (the median step − compute of the window up by kSevere
    // of the step: most of the window has seen it) is acted on at the first
    // check that sees it: on schedule_c1 fp16 ran 5 more steps at 20 Mbit/s
    // (~1.2 s) waiting for the next check.
    // A sharp rise (kSharpSteps steps in a row, each up by kSevere of the
    // step, their collectives 1 + 2·network_drift slower than the model's
    // reference) is acted on before the medians move.
    const bool changed = netTriggered_ || stepTriggered_ || sharp_;
    if (!changed) changeSince_ = -1;
    else if (changeSince_ < 0) changeSince_ = step;
    const bool settled = changed && (step - changeSince_ >= kPersist || severe_ || sharp_);
    const int64_t elapsed = step - lastDecision_;
    // A severe or sharp slowdown after a decision that measured its
    // references (it kept or explored the plan that runs) is the link's, not
    // the model's, and does not wait out network_interval: on schedule_c1 a
    // step-time decision at step 114, on the unshaped link, kept fp16, and
    // the change at 117 waited to step 145, fp16 running 28 steps at 20
    // Mbit/s (~0.23 s each over TopKC b=2's). After a predicted knee (whose
    // references carry the model's error) it waits network_interval, as
    // every change does; after a false alarm (backoff > 1) network_interval
    // too, not the backoff (actOnChange in ControllerDetail.h).
    if (soundTriggered_ && elapsed >= opts_.networkInterval)
      reason = kSounding;  // confirmed by two soundings: no settling, no backoff
    else if (settled &&
             actOnChange(severe_ || sharp_, measuredRefs_, elapsed, opts_.networkInterval, networkBackoff_)) {
      reason = netTriggered_ ? kNetwork : kStepTime;
      // Before the medians have moved, β comes from the sharp steps alone.
      if (sharp_ && !severe_ && step - changeSince_ < kPersist) betaSteps = int64_t(kSharpSteps);
    }
    else if (costTriggered_ || recheck(step))
      reason = kCost;
    else if (gainTriggered_ && elapsed >= opts_.minInterval)
      reason = kGain;
    if (reason == kNone) soundBytes = soundingDue(step);
  }
  // One buffer for every check: the last broadcast from it has completed
  // (afterStep waited for it before acting).
  if (!verdict_.defined()) verdict_ = torch::zeros({3}, torch::kLong);
  int64_t* v = verdict_.data_ptr<int64_t>();
  v[0] = reason;
  v[1] = soundBytes;
  v[2] = betaSteps;
  verdictWork_ = comm_.broadcast(verdict_, 0);
  verdictPending_ = true;
}

bool Controller::recheck(int64_t step) {
  const auto steps = int64_t(recent_.size());  // since the last decision
  if (!recheckDue_ || steps < opts_.recheckSteps) return false;
  recheckDue_ = false;
  // The running compressor's screened cost, through any collective (they
  // share its statistics).
  double screened = INFINITY;
  for (size_t i = 0; i < candidates_.size() && i < decidedPoints_.size(); ++i)
    if (candidates_[i].plan.codecKey() == active_.codecKey() && std::isfinite(decidedPoints_[i].time))
      screened = std::min(screened, decidedPoints_[i].stat);
  const double running = statCost(recheckStats_, active_, 0.0);
  const int64_t knee = recheckKnee(decidedPoints_, screened, running, opts_.timeWeight, opts_.kneeScale(),
                                   opts_.timeTolerance);
  const auto j = statsJson(recheckStats_);
  writeDecision(nlohmann::json{{"step", step},
                               {"event", "recheck"},
                               {"plan", active_.key()},
                               {"decision_step", lastDecision_},
                               {"steps", steps - opts_.recheckSteps / 2},
                               {"vnmse", j["vnmse"]},
                               {"cost", running},
                               {"screened_cost", screened},
                               {"knee", knee >= 0 ? nlohmann::json(candidates_[size_t(knee)].plan.key()) : nullptr},
                               {"redecide", knee >= 0}}
                    .dump());
  costTriggered_ = knee >= 0;
  return costTriggered_;
}

void Controller::finish() {
  if (!verdictPending_) return;
  verdictPending_ = false;
  verdictWork_.wait();
}

int64_t Controller::soundingDue(int64_t step) {
  if (opts_.soundEvery <= 0 || opts_.pin || !decided_ || !latencyBound_ || recent_.empty()) return 0;
  const int64_t bytes = BandwidthSounding::periodicBytes(comm_.size());
  if (lastSound_ < 0 || soundAgain_) return bytes;
  // Every sound_every steps, or less often where a sounding would take more
  // than sound_share of the steps in between (a slow link, fast steps).
  const double meanStep = recentStep_ / double(recent_.size());
  const double interval = std::max(double(opts_.soundEvery), sounding_.latest() / (opts_.soundShare * meanStep));
  return double(step - lastSound_) >= interval ? bytes : 0;
}

double Controller::timedAllReduce(int64_t bytes) {
  // Zeros, which the sum keeps zero: the buffer is reused as it is.
  if (!soundBuffer_.defined() || soundBuffer_.numel() != bytes / 4) soundBuffer_ = torch::zeros({bytes / 4}, torch::kFloat);
  const auto t0 = Clock::now();
  comm_.allReduce(soundBuffer_).wait();
  return since(t0);
}

void Controller::sound(int64_t step, int64_t bytes) {
  const double seconds = timedAllReduce(bytes);
  if (comm_.rank() == 0) {
    const double beta = BandwidthSounding::betaOf(seconds, bytes, comm_.size(), net_.alpha);
    const auto verdict = sounding_.add(seconds);
    lastSound_ = step;
    soundAgain_ = verdict == BandwidthSounding::Verdict::Suspect;
    soundTriggered_ = soundTriggered_ || verdict == BandwidthSounding::Verdict::Changed;
    static constexpr const char* kVerdicts[] = {"reference", "steady", "suspect", "changed"};
    writeDecision(nlohmann::json{{"step", step},
                                 {"event", "sounding"},
                                 {"plan", active_.key()},
                                 {"bytes", bytes},
                                 {"seconds", seconds},
                                 {"beta", beta},
                                 {"change", sounding_.change()},
                                 {"verdict", kVerdicts[int(verdict)]}}
                      .dump());
  }
}

void Controller::save(torch::serialize::OutputArchive& ar) const {
  const size_t index = indexOf(active_);
  // Fields 0-6, then (since the plan key) the step-time trigger's references
  // (7-9): without them a resumed run would not watch its step time until
  // the next decision. Then (since 11-29) the steps on the running plan, the
  // last decision's measured references and the network backoff (10-12):
  // without them a resumed run priced its running plan at the screened floor
  // for min_interval more steps (decide's settled cost), and waited out
  // network_interval on a slowdown it would have acted on at once.
  ar.write("controller/state",
           torch::tensor({index < candidates_.size() ? double(index) : -1.0, double(decided_), double(lastDecision_),
                          double(decisions_), net_.alpha, net_.beta, double(provisionalDone_), double(stepArmed_),
                          stepDrift_.reference(), syncRef_, double(planSteps_), double(measuredRefs_),
                          double(networkBackoff_)},
                         torch::kDouble),
           true);
  ar.write("controller/plan", c10::IValue(active_.key()));
  const auto noise = noise_.sums();
  ar.write("controller/noise", torch::tensor({noise[0], noise[1], noise[2]}, torch::kDouble), true);
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
  torch::Tensor t;
  ar.read("controller/state", t, true);
  // 6 fields before provisional_rewind (whose checkpoints are past the
  // provisional step), 7 before the trigger references, 10 before the steps
  // on the plan.
  GZ_CHECK(t.numel() == 6 || t.numel() == 7 || t.numel() == 10 || t.numel() == 13,
           "checkpoint: controller state has {} fields, expected 13", t.numel());
  const auto index = int64_t(t[0].item<double>());
  GZ_CHECK(index >= -1 && index < int64_t(candidates_.size()),
           "checkpoint: controller plan {} is not among the {} candidates of this config", index, candidates_.size());
  decided_ = t[1].item<double>() != 0;
  lastDecision_ = int64_t(t[2].item<double>());
  decisions_ = int64_t(t[3].item<double>());
  provisionalDone_ = t.numel() < 7 || t[6].item<double>() != 0;
  // α and β (fields 4, 5) are kept for the record: start() probed α as the
  // network is now, and β follows from the first steps after the resume
  // (settleBeta), which is what the next decision should use.
  // The running plan: by key; older checkpoints have only its index (-1:
  // `initial`).
  std::optional<Plan> plan;
  c10::IValue key;
  if (ar.try_read("controller/plan", key)) {
    GZ_CHECK(key.isString(), "checkpoint: controller/plan is not a plan key");
    plan = planFromKey(key.toStringRef());
    GZ_CHECK(indexOf(*plan) < candidates_.size() || *plan == opts_.initial || *plan == opts_.sparseStartPlan ||
                 (opts_.pin && *plan == *opts_.pin),
             "checkpoint: controller plan {} is none this config's controller runs (a candidate, initial {} or "
             "sparse_start_plan {})",
             plan->key(), opts_.initial.key(), opts_.sparseStartPlan.key());
  } else if (index >= 0) {
    plan = candidates_[size_t(index)].plan;
  } else if (provisionalDone_) {
    plan = opts_.initial;  // start() may have put the sparse start's plan on
  }
  if (t.numel() >= 10 && t[7].item<double>() != 0 && t[8].item<double>() > 0) {
    stepDrift_.reset(t[8].item<double>());
    syncRef_ = t[9].item<double>();
    stepArmed_ = true;
  }
  // The gradient noise sums (since 11-29; before, a resumed run's B_simple
  // started over).
  torch::Tensor noise;
  if (ar.try_read("controller/noise", noise, true)) {
    GZ_CHECK(noise.numel() == 3, "checkpoint: controller/noise has {} fields, expected 3", noise.numel());
    noise_.restore({noise[0].item<double>(), noise[1].item<double>(), noise[2].item<double>()});
  }
  // Not logged: plans.jsonl holds the record of this plan from when it was
  // applied (resumed() trims the log to the resume step).
  if (!opts_.pin && plan && !(*plan == active_)) applyPlan(*plan, lastDecision_, false);
  // After applyPlan, which starts the count afresh; pinned runs too (their
  // decisions keep the pin, with these references and back-off).
  if (t.numel() >= 13) {
    const double steps = t[10].item<double>(), backoff = t[12].item<double>();
    GZ_CHECK(steps >= 0 && backoff >= 1, "checkpoint: controller state has {} steps on the plan and backoff {}",
             steps, backoff);
    planSteps_ = int64_t(steps);
    measuredRefs_ = t[11].item<double>() != 0;
    networkBackoff_ = int64_t(backoff);
  }
  if (opts_.pin) return;
  // A checkpoint is past the provisional step (mayRewind): no sparse start
  // to measure for, β from the resumed plan's collectives (settleBeta).
  if (provisionalDone_) sparseSoundBytes_ = 0;
}

}  // namespace gradzip::trainer
