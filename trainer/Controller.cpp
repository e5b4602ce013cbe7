// Implements trainer/Controller.h.
#include "trainer/Controller.h"

#include "comm/NetworkProbe.h"
#include "compress/Factory.h"
#include "trainer/Pareto.h"
#include "trainer/PlanCost.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

namespace gradzip::trainer {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Observations after a decision whose median becomes a detector's reference:
// the new plan's own level, not the model's (the α-β model of a ping-pong
// probe predicts c10d's collectives only up to a constant factor).
constexpr size_t kCalibration = 10;
constexpr int64_t kGainSettle = 50;  // steps on a plan before its gain becomes the reference
constexpr double kSmoothing = 0.1;  // weight of a new observation in the drift averages
constexpr size_t kRecentCap = 1000;
// The network detector sees the median of the last kRatioWindow ratios of
// observed to predicted communication time (single collective times on a
// shared host have heavy tails, and on a fast link they are mostly scheduling
// noise), and a drift only counts when it moves the communication time by at
// least kMinImpact of the step time: a network change the step does not feel
// is not worth re-deciding for.
constexpr size_t kRatioWindow = 9;
constexpr double kMinImpact = 0.10;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

nlohmann::json statsJson(const CompressionStats& s) {
  const double in = s.inputSq > 0 ? s.inputSq : NAN;
  return {{"vnmse", s.errorSq / in}, {"gain", s.appliedSq / in}};
}

enum Reason : int64_t { kNone = 0, kInitial = 1, kNetwork = 2, kGain = 3, kStepTime = 4 };
const char* reasonName(int64_t r) {
  switch (r) {
    case kInitial: return "initial";
    case kNetwork: return "network";
    case kGain: return "gain";
    case kStepTime: return "step_time";
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
      stepDrift_(opts_.networkDrift, kSmoothing, kCalibration),
      gainDrift_(opts_.gainDrift, kSmoothing, kCalibration) {
  for (int k = 0; k < sync_.numBuckets(); ++k)
    if (sync_.bucketNumel(k) * 4 >= opts_.smallBucketKb * 1024) large_.push_back(k);
  if (large_.empty()) {
    // Every bucket is small: decide for all of them rather than for none.
    for (int k = 0; k < sync_.numBuckets(); ++k) large_.push_back(k);
  }
  active_ = opts_.pin ? *opts_.pin : opts_.initial;
  const std::string dir = fmt::format("{}/rank{}", runDir_, comm_.rank());
  std::filesystem::create_directories(dir);
  planLog_.open(dir + "/plans.jsonl", std::ios::app);
  GZ_CHECK(planLog_.good(), "cannot write {}/plans.jsonl", dir);
  spdlog::info("controller: {} candidate plans over {}; deciding for {} of {} buckets{}", candidates_.size(),
               fmt::join(opts_.families, ", "), large_.size(), sync_.numBuckets(),
               opts_.pin ? fmt::format(" (pinned to {})", opts_.pin->key()) : "");
}

Controller::~Controller() = default;

compress::Compressor& Controller::codec(const Plan& plan) {
  auto& slot = codecs_[plan.key()];
  if (!slot) {
    YamlReader r(plan.options, "<plan " + plan.key() + ">", "compress." + plan.compressor);
    slot = compress::makeCompressor(plan.compressor, r);
  }
  return *slot;
}

double Controller::commCoefficientsFor(int bucket, const Plan& plan, comm::AlphaBetaSample* out) {
  const int64_t d = sync_.bucketNumel(bucket);
  const double bits = codec(plan).bitsPerCoordinate(d, comm_.size());
  *out = planCoefficients(plan, bits, d, comm_.size());
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

void Controller::start(int64_t step) {
  if (comm_.size() >= 2) {
    const auto t0 = Clock::now();
    net_ = comm::probe(comm_, opts_.probe);
    spdlog::info("controller: probed α = {:.1f} µs, bandwidth {:.1f} Mbit/s in {:.1f} s", net_.alpha * 1e6,
                 comm::bandwidthBitsPerSec(net_) / 1e6, since(t0));
  }
  applyPlan(active_, step);
  for (int k = 0; k < sync_.numBuckets(); ++k)
    if (std::find(large_.begin(), large_.end(), k) == large_.end()) sync_.setPlan(k, opts_.smallPlan);
  sync_.setMeasureCompression(true);
  writeDecision(nlohmann::json{{"step", step},
                               {"event", "start"},
                               {"alpha", net_.alpha},
                               {"beta", net_.beta},
                               {"world_size", comm_.size()},
                               {"candidates", candidates_.size()},
                               {"plan", active_.key()},
                               {"small_plan", opts_.smallPlan.key()}}
                    .dump());
}

void Controller::applyPlan(const Plan& large, int64_t step) {
  active_ = large;
  activeCoef_.clear();
  for (int k : large_) {
    sync_.setPlan(k, large);
    activeCoef_.emplace_back();
    commCoefficientsFor(k, large, &activeCoef_.back());
  }
  planLog_ << nlohmann::json{{"step", step}, {"plan", large.key()}}.dump() << "\n";
  planLog_.flush();
  resetMeasurements();
}

void Controller::resetMeasurements() {
  recent_.clear();
  recentStats_ = {};
  recentComm_ = recentStep_ = 0;
  ratios_.clear();
  calibration_.clear();
  netArmed_ = gainArmed_ = netTriggered_ = gainTriggered_ = drifting_ = stepTriggered_ = false;
  gainSeen_ = 0;
  changeSince_ = -1;
  steps_.clear();
  syncs_.clear();
}

double Controller::statCost(const CompressionStats& s) const {
  if (!(s.inputSq > 0)) return INFINITY;
  if (opts_.stat == "gain") return s.appliedSq > 0 ? s.inputSq / s.appliedSq : INFINITY;  // 1/gain (the paper)
  return s.errorSq / s.inputSq;                                                           // vNMSE
}

void Controller::observe(const StepMeasure& m) {
  CompressionStats stats;
  double observed = 0, predicted = 0;
  for (size_t i = 0; i < large_.size(); ++i) {
    stats += sync_.lastStats(large_[i]);
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
    recentComm_ += observed;
    recentStep_ += m.step;
  }
  steps_.push_back(m.step);
  if (steps_.size() > kRatioWindow) steps_.erase(steps_.begin());
  syncs_.push_back(std::max(0.0, m.step - m.compute));
  if (syncs_.size() > kRatioWindow) syncs_.erase(syncs_.begin());
  recentStats_ += stats;
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
  spdlog::debug("controller: comm observed {:.3g} s, predicted {:.3g} s (ratio median {:.3g}, smoothed {:.3g}, "
                "reference {:.3g}); gain {:.4g}{}{}",
                observed, predicted, ratios_.empty() ? NAN : median(ratios_), netDrift_.smoothed(),
                netDrift_.reference(), gain, netTriggered_ ? "; network changed" : "",
                gainTriggered_ ? "; gain drifted" : "");
  gainTriggered_ = gainArmed_ && gainDrift_.update(gain);
  if (followup_.step >= 0 && followup_.count < opts_.followupSteps) {
    followup_.sum += m.step;
    if (++followup_.count == opts_.followupSteps) {
      const double measured = followup_.sum / double(followup_.count);
      writeDecision(nlohmann::json{{"event", "followup"},
                                   {"decision_step", followup_.step},
                                   {"plan", active_.key()},
                                   {"predicted_step", followup_.predicted},
                                   {"explored_step", followup_.explored},
                                   {"measured_step", measured},
                                   {"prediction_error", (followup_.predicted - measured) / measured}}
                        .dump());
    }
  }
}

double Controller::afterStep(int64_t step, const StepMeasure& m, ControlledLoop& loop) {
  if (comm_.size() < 2) return 0;
  observe(m);
  if (step < opts_.warmupSteps || step % opts_.checkEvery != 0) return 0;
  int64_t reason = kNone;
  if (comm_.rank() == 0) {
    // A network or step-time change must persist for kRatioWindow steps
    // before it is acted on: by then the latest observations (α-β refit, the
    // running plan's step time) all see the new network, not a mix, and a
    // burst of noise has passed.
    const bool changed = netTriggered_ || stepTriggered_;
    if (!changed) changeSince_ = -1;
    else if (changeSince_ < 0) changeSince_ = step;
    const bool settled = changed && step - changeSince_ >= int64_t(kRatioWindow);
    const int64_t elapsed = step - lastDecision_;
    if (!decided_)
      reason = kInitial;
    else if (settled && elapsed >= opts_.networkInterval * networkBackoff_)
      reason = netTriggered_ ? kNetwork : kStepTime;
    else if (gainTriggered_ && elapsed >= opts_.minInterval)
      reason = kGain;
  }
  reason = broadcastInt(reason);
  if (reason == kNone) return 0;
  const auto t0 = Clock::now();
  decide(step, reasonName(reason), loop);
  return since(t0);
}

bool Controller::adoptObservedBeta(double margin) {
  // β per observation: (t − a·α)/m with the plan's coefficients (Table I),
  // from the observations that took well over their latency term (an α-bound
  // all-gather of a few hundred bytes would turn its latency noise into a
  // bogus bandwidth).
  std::vector<double> betas;
  for (const auto& o : lastSamples_)
    if (o.betaBytes > 0 && o.seconds >= 2 * o.alphaCount * net_.alpha)
      betas.push_back(std::max(0.0, o.seconds - o.alphaCount * net_.alpha) / o.betaBytes);
  if (betas.size() < kRatioWindow / 2 + 1) return false;  // too few for a median that ignores a burst
  const double observed = median(betas);
  if (!(observed > net_.beta * (1 + margin))) return false;
  net_.beta = observed;
  return true;
}

Controller::Screened Controller::screen(const Plan& plan) {
  Screened s;
  try {
    auto& c = codec(plan);
    for (int k : large_) {
      // This rank's last local gradient (the aggregated mean would already
      // carry the current plan's rounding).
      const auto& x = sync_.lastInput(k).defined() ? sync_.lastInput(k) : sync_.bucketGradient(k);
      const int64_t d = x.numel();
      compress::Context ctx{local_, nullptr, plan.collective, sync_.bucketLayout(k), 0, k, 0, nullptr};
      at::Tensor y;
      double seconds = 0;
      for (int rep = 0; rep < 2; ++rep) {  // the first call builds caches (tables, plans); time the second
        const auto t0 = Clock::now();
        auto p = c.encode(x, ctx);
        y = c.decode(p, d, ctx);
        seconds = since(t0);
      }
      s.encodeDecode += seconds;
      s.stats.inputSq += x.square().sum().item<double>();
      s.stats.appliedSq += y.square().sum().item<double>();
      s.stats.errorSq += (x - y).square().sum().item<double>();
      comm::AlphaBetaSample coef;
      const double bits = commCoefficientsFor(k, plan, &coef);
      s.bits += bits * double(d);
      s.comm += planSeconds(coef, net_);
    }
    int64_t total = 0;
    for (int k : large_) total += sync_.bucketNumel(k);
    s.bits /= double(std::max<int64_t>(1, total));
    s.ok = true;
  } catch (const std::exception& e) {
    spdlog::debug("controller: screening {} failed: {}", plan.key(), firstLine(e.what()));
  }
  codecs_.erase(plan.key());  // screening advanced its state (residuals); start afresh next time
  return s;
}

Controller::Measured Controller::explore(const Plan& plan, ControlledLoop& loop) {
  Measured out;
  const Plan before = active_;
  for (int k : large_) sync_.setPlan(k, plan);
  double seconds = 0, sync = 0;
  int64_t timed = 0;
  try {
    for (int64_t i = 0; i < opts_.exploreSteps; ++i) {
      const auto m = loop.exploreStep();
      if (i == 0) continue;  // builds the compressor and its caches
      seconds += m.step;
      sync += std::max(0.0, m.step - m.compute);
      ++timed;
      for (int k : large_) out.stats += sync_.lastStats(k);
    }
    out.step = seconds / double(std::max<int64_t>(1, timed));
    out.sync = sync / double(std::max<int64_t>(1, timed));
    out.ok = timed > 0;
  } catch (const NonFiniteGradient& e) {
    spdlog::warn("controller: exploring {} produced a non-finite gradient ({}); not a candidate this time", plan.key(),
                 e.what());
  }
  for (int k : large_) sync_.setPlan(k, before);
  return out;
}

void Controller::decide(int64_t step, const std::string& reason, ControlledLoop& loop) {
  const int n = comm_.size();
  nlohmann::json rec{{"step", step}, {"event", "decision"}, {"trigger", reason}, {"world_size", n}};
  // 1. α, β when the network moved: the robust fit of the collectives observed
  // since the drift began where they identify both (several bucket sizes or
  // collectives); otherwise (one plan, one bucket: all observations share
  // their coefficients) a fresh probe, which every rank joins.
  const bool networkTrigger = reason == "network" || reason == "step_time";
  bool networkChanged = false;
  if (networkTrigger) {
    const auto before = net_;
    std::optional<comm::NetworkParams> fit;
    if (comm_.rank() == 0) fit = fitter_.fit();
    if (broadcastInt(fit && fit->beta > 0 ? 1 : 0)) {
      if (comm_.rank() == 0) net_ = *fit;
      rec["refit"] = "least squares over the observed collectives";
      if (comm_.rank() == 0 && adoptObservedBeta(opts_.networkDrift))
        rec["refit"] = "least squares for α; β from the running plan's latest collectives (slower than the fit)";
    } else {
      net_ = comm::probe(comm_, opts_.probe);
      const double probed = net_.beta;
      rec["refit"] = "probe";
      // A token-bucket shaper lets the probe's small messages through at
      // line rate (its burst), so the probe can see a fast link that the
      // running plan's collectives do not: β from those, when slower, wins.
      if (comm_.rank() == 0 && adoptObservedBeta(0.0)) {
        rec["beta_probe"] = probed;
        rec["refit"] = "probe for α; β from the observed collectives (slower than the probe saw)";
      }
    }
    rec["alpha_before"] = before.alpha;
    rec["beta_before"] = before.beta;
    networkChanged = std::abs(net_.beta / before.beta - 1) > opts_.networkDrift;
  } else if (comm_.rank() == 0) {
    // Any other decision: the running plan's latest collectives must not be
    // slower than the model says by more than the network threshold. A link
    // that slowed just before a gain-triggered decision (or while the network
    // detector was calibrating) would otherwise steer exploration to dense
    // plans, and the references taken afterwards would hide the change.
    const double beta = net_.beta;
    if (adoptObservedBeta(opts_.networkDrift)) {
      rec["beta_before"] = beta;
      rec["refit"] = "β from the running plan's observed collectives (slower than the model by more than network_drift)";
    }
  }
  fitter_.clear();
  rec["alpha"] = net_.alpha;
  rec["beta"] = net_.beta;
  rec["bandwidth_mbit"] = comm::bandwidthBitsPerSec(net_) / 1e6;

  // 2. Screening on rank 0; the explored candidates go to every rank.
  std::vector<int64_t> exploreList;
  double base = 0;
  std::vector<Screened> screened(candidates_.size());
  if (comm_.rank() == 0) {
    double compute = 0;
    for (const auto& m : recent_) {
      base += m.step - m.encode - m.communicate - m.decode;
      compute += m.compute;
    }
    base = std::max(base, compute) / double(std::max<size_t>(1, recent_.size()));
    std::vector<Objectives> pts(candidates_.size(), Objectives{INFINITY, INFINITY});
    auto& cands = rec["candidates"] = nlohmann::json::array();
    for (size_t i = 0; i < candidates_.size(); ++i) {
      auto& s = screened[i];
      s = screen(candidates_[i].plan);
      if (s.ok) {
        s.predicted = base + s.encodeDecode + s.comm;
        pts[i] = {s.predicted, statCost(s.stats)};
      }
      auto j = statsJson(s.stats);
      cands.push_back({{"plan", candidates_[i].plan.key()},
                       {"ok", s.ok},
                       {"bits", s.bits},
                       {"encode_decode", s.encodeDecode},
                       {"comm", s.comm},
                       {"predicted_step", s.predicted},
                       {"vnmse", j["vnmse"]},
                       {"gain", j["gain"]}});
    }
    rec["base_step"] = base;
    std::vector<int64_t> buckets;
    for (int k : large_) buckets.push_back(sync_.bucketNumel(k));
    rec["buckets"] = buckets;
    const auto front = paretoFront(pts);
    rec["front"] = front;
    // The knee first, then the knee of what is left, and so on.
    // After a network change the running plan's own recent steps straddle
    // the change, so it is explored afresh like the others; otherwise its
    // recent steps measure it.
    const bool remeasure = reason == "network" || reason == "step_time";
    // Otherwise a candidate is worth exploring only if, predicted
    // explore_margin slower, it would still replace the running plan as
    // measured: where communication is a few % of the step nothing can.
    const Objectives current{steps_.empty() ? INFINITY : median(steps_), statCost(recentStats_)};
    auto& skipped = rec["not_explored"] = nlohmann::json::array();
    auto remaining = pts;
    while (int64_t(exploreList.size()) < opts_.explore && !paretoFront(remaining).empty()) {
      const size_t i = kneePoint(remaining, opts_.timeWeight, opts_.kneeScale());
      remaining[i] = {INFINITY, INFINITY};
      if (candidates_[i].plan == active_) continue;
      if (!remeasure && !couldReplace(current, pts[i], opts_.exploreMargin, opts_.timeWeight, opts_.kneeScale())) {
        skipped.push_back(candidates_[i].plan.key());
        continue;
      }
      exploreList.push_back(int64_t(i));
    }
    if (remeasure)
      for (size_t i = 0; i < candidates_.size(); ++i)
        if (candidates_[i].plan == active_ && screened[i].ok) exploreList.push_back(int64_t(i));
  }
  auto list = torch::full({opts_.explore + 2}, int64_t(-1), torch::kLong);  // + the running plan
  list[0] = int64_t(exploreList.size());
  for (size_t i = 0; i < exploreList.size(); ++i) list[i + 1] = exploreList[i];
  comm_.broadcast(list, 0).wait();
  exploreList.clear();
  for (int64_t i = 0; i < list[0].item<int64_t>(); ++i) exploreList.push_back(list[i + 1].item<int64_t>());

  // 3. Exploration from an in-memory checkpoint, restored after each candidate.
  const auto t0 = Clock::now();
  const std::string snap = loop.snapshot();
  const auto keys = sync_.compressorKeys();
  std::vector<Measured> measured;
  for (int64_t i : exploreList) {
    measured.push_back(explore(candidates_[i].plan, loop));
    sync_.keepOnly(keys);
    loop.restore(snap);
  }
  rec["explore_seconds"] = since(t0);

  // 4. The knee of the measured points (the current plan from its recent steps).
  int64_t chosen = -2;  // -2: keep the current plan
  double stepRef = 0, syncRef = 0;  // the chosen plan's measured step time and its step − compute
  if (comm_.rank() == 0) {
    std::vector<Objectives> pts;
    auto& ex = rec["explored"] = nlohmann::json::array();
    for (size_t i = 0; i < exploreList.size(); ++i) {
      const auto& m = measured[i];
      pts.push_back(m.ok ? Objectives{m.step, statCost(m.stats)} : Objectives{INFINITY, INFINITY});
      auto j = statsJson(m.stats);
      ex.push_back({{"plan", candidates_[exploreList[i]].plan.key()},
                    {"ok", m.ok},
                    {"measured_step", m.step},
                    {"predicted_step", screened[exploreList[i]].predicted},
                    {"vnmse", j["vnmse"]},
                    {"gain", j["gain"]}});
    }
    // The running plan's step time now: the median of its latest steps (its
    // mean since the last decision would hide a network that just changed).
    const double currentStep = steps_.empty() ? INFINITY : median(steps_);
    const bool remeasured = std::find_if(exploreList.begin(), exploreList.end(), [&](int64_t i) {
                              return candidates_[i].plan == active_;
                            }) != exploreList.end();
    pts.push_back(std::isfinite(currentStep) && !remeasured ? Objectives{currentStep, statCost(recentStats_)}
                                                            : Objectives{INFINITY, INFINITY});
    auto cj = statsJson(recentStats_);
    rec["current"] = {{"plan", active_.key()}, {"measured_step", currentStep}, {"vnmse", cj["vnmse"]},
                      {"gain", cj["gain"]}, {"steps", recent_.size()}};
    if (!paretoFront(pts).empty()) {
      const size_t k = kneePoint(pts, opts_.timeWeight, opts_.kneeScale());
      chosen = k < exploreList.size() ? exploreList[k] : -2;
      followup_ = {};
      followup_.step = step;
      followup_.predicted = k < exploreList.size() ? screened[exploreList[k]].predicted : currentStep;
      followup_.explored = pts[k].time;
      stepRef = pts[k].time;
      syncRef = k < exploreList.size() ? measured[k].sync : median(syncs_);
    }
  }
  chosen = broadcastInt(chosen);
  const Plan pick = chosen >= 0 ? candidates_[chosen].plan : active_;
  rec["chosen"] = pick.key();
  rec["pinned"] = bool(opts_.pin);
  if (chosen >= 0 && !opts_.pin) {
    activeIndex_ = chosen;
    applyPlan(pick, step);
  } else {
    // Same plan (or pinned): keep measuring it, with fresh references.
    resetMeasurements();
  }
  if (std::isfinite(stepRef) && stepRef > 0) {  // rank 0 alone evaluates the triggers
    stepDrift_.reset(stepRef);
    syncRef_ = syncRef;
    stepArmed_ = true;
  }
  // A network trigger whose refit found the bandwidth within network_drift
  // was a false alarm (noise on short steps, a loaded host): the next network
  // trigger waits twice as long, up to min_interval. A real change resets the
  // wait.
  if (networkTrigger) {
    networkChanged = broadcastInt(networkChanged ? 1 : 0) != 0;
    if (networkChanged)
      networkBackoff_ = 1;
    else
      networkBackoff_ = std::min(2 * networkBackoff_, std::max<int64_t>(1, opts_.minInterval / opts_.networkInterval));
    rec["network_backoff"] = networkBackoff_;
  }
  decided_ = true;
  lastDecision_ = step;
  ++decisions_;
  writeDecision(rec.dump());
  spdlog::info("controller: step {} ({} trigger): {} {} after exploring {} plans in {:.1f} s", step, reason,
               opts_.pin ? "would pick" : "picked", pick.key(), exploreList.size(), rec["explore_seconds"].get<double>());
}

void Controller::save(torch::serialize::OutputArchive& ar) const {
  ar.write("controller/state",
           torch::tensor({double(activeIndex_), double(decided_), double(lastDecision_), double(decisions_), net_.alpha,
                          net_.beta},
                         torch::kDouble),
           true);
}

void Controller::load(torch::serialize::InputArchive& ar) {
  torch::Tensor t;
  ar.read("controller/state", t, true);
  GZ_CHECK(t.numel() == 6, "checkpoint: controller state has {} fields, expected 6", t.numel());
  const auto index = int64_t(t[0].item<double>());
  GZ_CHECK(index >= -1 && index < int64_t(candidates_.size()),
           "checkpoint: controller plan {} is not among the {} candidates of this config", index, candidates_.size());
  decided_ = t[1].item<double>() != 0;
  lastDecision_ = int64_t(t[2].item<double>());
  decisions_ = int64_t(t[3].item<double>());
  // α and β (fields 4, 5) are kept for the record: start() probed the network
  // as it is now, which is what the next decision should use.
  activeIndex_ = index;
  if (index >= 0 && !opts_.pin) applyPlan(candidates_[index].plan, lastDecision_);
}

}  // namespace gradzip::trainer
