// Implements trainer/Controller.h's decision (Controller::decide): α and β
// refitted or probed when the network moved (β from the bandwidth
// soundings while the running plan is latency-bound), every candidate screened on
// rank 0 (encode/decode timed on this rank's last gradient, wire bits into
// the α-β model), the candidates near the knee of the predicted front that
// could replace the running plan explored from an in-memory checkpoint, and
// the knee of the measured points broadcast to every rank
// (flexible-communication paper §3-E; DIGEST.md §5); and the provisional plan
// of the warm-up, the knee of the predicted front alone.
#include "trainer/Controller.h"

#include "comm/NetworkProbe.h"
#include "compress/ErrorFeedback.h"
#include "compress/Factory.h"
#include "trainer/ControllerDetail.h"
#include "trainer/Pareto.h"
#include "trainer/PlanCost.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>

namespace gradzip::trainer {
using namespace detail;  // trainer/ControllerDetail.h

namespace {
// The steps' mean forward+backward time.
double meanCompute(std::span<const StepMeasure> steps) {
  double compute = 0;
  for (const auto& m : steps) compute += m.compute;
  return compute / double(std::max<size_t>(1, steps.size()));
}

// The step time a plan's exposed sync adds to (the predictions' base): the
// measured steps minus the time the training thread waited for the running
// plan's sync after backward, but at least their forward+backward time,
// averaged.
double baseStep(std::span<const StepMeasure> steps) {
  double base = 0;
  for (const auto& m : steps) base += m.step - m.exposed;
  return std::max(base / double(std::max<size_t>(1, steps.size())), meanCompute(steps));
}

// The step time a decision compares a measured plan by (common_base): its
// step as measured, or on the decision's common base (> 0) that base plus
// the plan's step − compute.
double comparedTime(double base, double step, double sync) { return base > 0 ? base + sync : step; }
}  // namespace

double Controller::minOverRanks(double value) {
  auto t = torch::full({1}, value, torch::kDouble);
  comm_.allReduce(t, comm::ReduceOp::Min).wait();
  return t.item<double>();
}

double Controller::observedBetaOfRanks() {
  if (betaSteps_ == 0) return minOverRanks(observedBeta(lastSamples_, net_.alpha));
  // A sharp change (afterStep): only the collectives of its betaSteps_ steps
  // see the new link; most of them must be well above their latency term.
  const size_t n = std::min(lastSamples_.size(), size_t(betaSteps_) * large_.size());
  const std::vector<comm::AlphaBetaSample> since(lastSamples_.end() - std::ptrdiff_t(n), lastSamples_.end());
  return minOverRanks(observedBeta(since, net_.alpha, n / 2 + 1));
}

bool Controller::adoptObservedBeta(double margin) {
  const double observed = observedBetaOfRanks();
  if (comm_.rank() != 0 || !std::isfinite(observed)) return false;
  if (!(observed > net_.beta * (1 + margin))) return false;
  net_.beta = observed;
  return true;
}

namespace {
// Coordinates the steady-state replay of an error-feedback codec runs on:
// the large buckets in order, up to this many (at least one bucket). The
// statistic is a ratio of sums, which a sample of buckets estimates; 2^20
// keeps R replays of the ~30 codec configurations near a second at BERT or
// VGG sizes, and covers every ResNet-20 bucket.
constexpr int64_t kSteadyStateCoordinates = int64_t(1) << 20;
// The most rank 0 keeps for screen_window's gradients: 8 of the 2^20
// coordinates above take 32 MiB; a window of first buckets larger than
// that holds fewer (8 gradients of a 64 MB bucket: 4), and below two it is
// off.
constexpr int64_t kScreenWindowBytes = int64_t(256) << 20;
}  // namespace

std::vector<int> Controller::steadyStateBuckets() const {
  std::vector<int> out;
  int64_t covered = 0;
  for (int k : large_) {
    const int64_t d = sync_.bucketNumel(k);
    if (!out.empty() && covered + d > kSteadyStateCoordinates) continue;
    out.push_back(k);
    covered += d;
  }
  return out;
}

size_t Controller::windowCapacity() const {
  if (opts_.screenWindow < 2) return 0;
  int64_t bytes = 0;  // one gradient of the steadyStateBuckets(), float32 as GradSync's flat buckets
  for (int k : steadyStateBuckets()) bytes += sync_.bucketNumel(k) * int64_t(sizeof(float));
  const int64_t cap = std::min<int64_t>(opts_.screenWindow, kScreenWindowBytes / std::max<int64_t>(1, bytes));
  return cap >= 2 ? size_t(cap) : 0;
}

void Controller::keepGradient() {
  if (comm_.rank() != 0) return;
  const size_t cap = windowCapacity();
  if (cap == 0) return;
  const auto buckets = steadyStateBuckets();
  for (int k : buckets)
    if (!sync_.lastInput(k).defined()) return;
  std::vector<at::Tensor> slot;
  if (window_.size() >= cap) {  // reuse the oldest's storage
    slot = std::move(window_.front());
    window_.pop_front();
  }
  slot.resize(buckets.size());
  for (size_t i = 0; i < buckets.size(); ++i) {
    const auto& g = sync_.lastInput(buckets[i]);
    if (!slot[i].defined() || slot[i].numel() != g.numel()) slot[i] = at::empty_like(g);
    slot[i].copy_(g);
  }
  window_.push_back(std::move(slot));
}

Controller::Screened Controller::screenCodec(const Plan& plan) {
  Screened s;
  // An error-feedback codec's sequence: the window's gradients twice over
  // once it holds screen_window of them, else screen_reps replays of the last.
  const auto steady = steadyStateBuckets();
  const size_t cap = windowCapacity();
  const size_t distinct = cap > 0 && window_.size() >= cap ? window_.size() : 1;
  const int64_t calls = distinct > 1 ? 2 * int64_t(distinct) : std::max<int64_t>(2, opts_.screenReps);
  try {
    for (int k : large_) {
      // A fresh codec per bucket: an error-feedback residual belongs to one bucket.
      const auto codec = freshCodec(plan);
      auto& c = *codec;
      const auto* fed = dynamic_cast<const compress::ErrorFeedback*>(&c);  // null: no error feedback
      // This rank's last local gradient (the aggregated mean would already
      // carry the current plan's rounding).
      const auto& last = sync_.lastInput(k).defined() ? sync_.lastInput(k) : sync_.bucketGradient(k);
      const int64_t d = last.numel();
      const auto pos = std::find(steady.begin(), steady.end(), k);
      const bool replay = fed && pos != steady.end();
      const size_t slot = size_t(pos - steady.begin());  // its tensor in a window_ entry
      const int64_t reps = replay ? calls : 2;
      for (int64_t rep = 0; rep < reps; ++rep) {
        // Oldest first, so that the last call is on the newest gradient.
        const at::Tensor& x = replay && distinct > 1 ? window_[size_t(rep) % distinct][slot] : last;
        // Each call a step of its own: shared-seed randomness (THC's
        // rotation and rounding) drawn afresh, as in training, so its errors
        // do not add up in the residual (with one seed THC 4-bit screened
        // 0.15 after 8 replays, against 0.02 while it runs).
        compress::Context ctx{local_, nullptr, plan.collective, sync_.bucketLayout(k), 0, k, rep, nullptr};
        // The compressor's input, the residual included (as GradSync measures
        // the running plan), before encode() moves the residual on.
        const at::Tensor in = fed && fed->residual().defined() ? x + fed->residual() : x;
        const auto t0 = Clock::now();
        auto p = c.encode(x, ctx);
        at::Tensor y = c.decode(p, d, ctx);
        // The first call builds caches (tables, plans): time the second.
        if (rep == 1) {
          s.bucketEncodeDecode.push_back(since(t0));
          s.encodeDecode += s.bucketEncodeDecode.back();
        }
        // Statistics: without error feedback from the timed call; with it from
        // the sequence's last call, on the last gradient.
        if ((!fed && rep == 1) || (replay && rep + 1 == reps))
          s.stats += measureCompression(in, y, sync_.bucketLayout(k), sync_.statWeights(k)).weighted;
        if (rep == 1) {  // shape-aware after an encode
          s.bucketBits.push_back(c.bitsPerCoordinate(d, comm_.size()));
          s.bucketDownBits.push_back(c.downlinkBitsPerCoordinate(d, comm_.size()));
        }
      }
    }
    s.gradients = int64_t(distinct);
    s.ok = true;
  } catch (const std::exception& e) {
    spdlog::debug("controller: screening {} failed: {}", plan.key(), firstLine(e.what()));
  }
  return s;
}

std::vector<Objectives> Controller::screenAll(double base, const OverlapTimings& timing,
                                              std::vector<Screened>& screened, nlohmann::json& rec,
                                              std::map<std::string, Screened>& byCodec,
                                              const std::string& onlyCompressor) {
  std::vector<Objectives> pts(candidates_.size(), Objectives{INFINITY, INFINITY});
  screened.assign(candidates_.size(), Screened{});
  // encode/decode do not depend on the collective: a compressor configuration
  // is screened once, and its candidates differ in communication alone.
  auto& cands = rec["candidates"] = nlohmann::json::array();
  int64_t total = 0;
  for (int k : large_) total += sync_.bucketNumel(k);
  // The pipeline's inputs (trainer/OverlapModel.h).
  const auto overlap = timing.inputs(large_);
  rec["overlap"] = {{"backward_end", overlap.backwardEnd}, {"handover", overlap.handover},
                    {"overhead", overlap.overhead},         {"busy", overlap.busy},
                    {"large", overlap.large}};
  // The codecs byCodec lacks, on screen_threads workers (this thread one of
  // them): those screenAhead started, or all of them from here.
  if (!screening_) screenAhead(byCodec, onlyCompressor, 0);
  screening_->work->ensureWorkers(int(opts_.screenThreads) - 1);
  screening_->work->finish();
  for (size_t i = 0; i < screening_->plans.size(); ++i)
    byCodec.emplace(screening_->plans[i].codecKey(), std::move(screening_->results[i]));
  rec["screen_threads"] = opts_.screenThreads;
  rec["codecs_screened"] = screening_->plans.size();
  screening_.reset();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const Plan& plan = candidates_[i].plan;
    if (!onlyCompressor.empty() && plan.compressor != onlyCompressor) {
      cands.push_back({{"plan", plan.key()}, {"ok", false}, {"screened", false}});
      continue;
    }
    const auto it = byCodec.find(plan.codecKey());
    GZ_ASSERT(it != byCodec.end(), "screenAll: {} was not screened", plan.key());
    auto& s = screened[i];
    s = it->second;
    if (s.ok) {
      // Per large bucket its encode/decode and α-β communication.
      std::vector<double> work;
      for (size_t j = 0; j < large_.size(); ++j) {
        const int64_t d = sync_.bucketNumel(large_[j]);
        const double comm =
            planSeconds(planCoefficients(plan, s.bucketBits[j], d, comm_.size(), s.bucketDownBits[j]), net_);
        s.comm += comm;
        s.bits += s.bucketBits[j] * double(d);
        work.push_back(s.bucketEncodeDecode[j] + comm);
      }
      s.bits /= double(std::max<int64_t>(1, total));
      s.exposed = overlap.exposed(work);
      s.predicted = base + s.exposed;
      pts[i] = {s.predicted, statCost(s.stats, plan)};
    }
    auto j = statsJson(s.stats);
    cands.push_back({{"plan", plan.key()},
                     {"ok", s.ok},
                     {"bits", s.bits},
                     {"encode_decode", s.encodeDecode},
                     {"comm", s.comm},
                     {"exposed", s.exposed},
                     {"predicted_step", s.predicted},
                     {"vnmse", j["vnmse"]},
                     {"gain", j["gain"]}});
  }
  rec["base_step"] = base;
  rec["screen_reps"] = opts_.screenReps;
  // Distinct gradients behind the error-feedback screenings used here (1:
  // replays; reused screenings keep theirs).
  int64_t gradients = 0;
  for (const auto& s : screened)
    if (s.ok) gradients = std::max(gradients, s.gradients);
  rec["screen_gradients"] = gradients;
  std::vector<int64_t> buckets;
  for (int k : large_) buckets.push_back(sync_.bucketNumel(k));
  rec["buckets"] = buckets;
  rec["front"] = paretoFront(pts);
  return pts;
}

void Controller::screenAhead(const std::map<std::string, Screened>& byCodec, const std::string& onlyCompressor,
                             int background) {
  auto s = std::make_unique<Screening>();
  std::set<std::string> keys;
  for (const auto& c : candidates_) {
    if (!onlyCompressor.empty() && c.plan.compressor != onlyCompressor) continue;
    const auto key = c.plan.codecKey();
    if (byCodec.count(key) || !keys.insert(key).second) continue;
    s->plans.push_back(c.plan);
    s->plans.back().options = YAML::Clone(c.plan.options);
  }
  s->results.resize(s->plans.size());
  Screening* raw = s.get();
  s->work = std::make_unique<WorkAhead>(raw->plans.size(), background,
                                        [this, raw](size_t i) { raw->results[i] = screenCodec(raw->plans[i]); });
  screening_ = std::move(s);
}

size_t Controller::indexOf(const Plan& plan) const {
  return size_t(std::find_if(candidates_.begin(), candidates_.end(), [&](const Candidate& c) { return c.plan == plan; }) -
                candidates_.begin());
}

double Controller::provisional(int64_t step, const StepMeasure& m, ControlledLoop& loop, double spent) {
  const auto t0 = Clock::now();
  provisionalDone_ = true;
  nlohmann::json rec{{"step", step}, {"event", "provisional"}, {"world_size", comm_.size()}, {"measured_on", active_.key()}};
  int64_t chosen = -1;
  // What afterStep's screenAhead finished while β was measured.
  if (screening_) rec["screened_during_beta"] = screening_->work->done();
  if (betaPending_) settleBeta(step);
  if (comm_.rank() == 0) {
    // The base from this step alone: the steps before it carry start-up costs.
    std::vector<Screened> screened;
    if (!screening_) provisionalScreens_.clear();
    OverlapTimings timing;  // this step's alone, as the base
    addTimings(timing);
    const auto pts = screenAll(baseStep({&m, 1}), timing, screened, rec, provisionalScreens_);
    if (!paretoFront(pts).empty()) {
      chosen = int64_t(opts_.kneeOf(pts));
      // `initial` stays unless the knee, predicted explore_margin slower,
      // would still replace it as predicted: a saving within the model's
      // error is no reason to compress. With 4 ranks on the 2 cores of the
      // unshaped link TopKC 8-bit was predicted 0.1% faster than fp16 and ran
      // for the whole epoch, its collectives no faster than fp32's. (After a
      // sparse start `initial` is not what the steps ran: kept, it is
      // restarted from the rewind like any other choice.)
      const size_t self = indexOf(opts_.initial);
      if (self < candidates_.size() && size_t(chosen) != self &&
          !couldReplace(pts[self], pts[size_t(chosen)], opts_.exploreMargin, opts_.timeWeight, opts_.kneeScale())) {
        rec["kept"] = fmt::format("{} is predicted within explore_margin ({}) of the knee {}", opts_.initial.key(),
                                  opts_.exploreMargin, candidates_[size_t(chosen)].plan.key());
        chosen = int64_t(self);
      }
      rec["predicted_step"] = screened[size_t(chosen)].predicted;
    }
  }
  chosen = broadcastInt(chosen);
  const bool moves = chosen >= 0 && !(candidates_[size_t(chosen)].plan == active_);
  const bool rewind = moves && !rewindState_.empty();
  const int64_t from = rewind ? rewindStep_ : step;
  if (rewind) logUndone(from, active_.key(), step - from, "provisional_rewind");
  if (moves) applyPlan(candidates_[size_t(chosen)].plan, from);
  if (rewind) {
    // The steps so far measured; undone, they leave no trace of what they
    // ran in the model, the optimizer, the data position or the compressor
    // states: those their plan made (the sparse start's error-feedback
    // residual) are dropped, and restoring builds the chosen plan's afresh
    // (GradSync::load), as a run on it from the start would. Every rank kept
    // its state at the same step (begin), so all rewind together.
    sync_.keepOnly(rewindKeys_);
    loop.restore(rewindState_);
    window_.clear();  // the undone steps' gradients come again
    rec["rewound"] = {{"to_step", from}, {"steps", step - from}};
    refreshGeometry();  // measured in the restored optimizer's geometry
    geometryRefreshed_ = false;  // and again after its first step
  }
  rewindState_.clear();
  rewindState_.shrink_to_fit();
  rewindKeys_.clear();
  const double seconds = since(t0);
  rec["chosen"] = active_.key();
  rec["seconds"] = seconds;
  // With a rewind the restored clock predates the undone steps (and `spent`):
  // every second since the state was kept is charged here.
  const double charged = from < step ? since(rewindSince_) : spent + seconds;
  if (from < step) rec["charged_seconds"] = charged;
  writeDecision(rec.dump());
  spdlog::info("controller: step {} (provisional, until the first decision at step {}): {} from the predicted front{}",
               step, opts_.warmupSteps, active_.key(),
               from < step ? fmt::format("; the {} steps before it undone, training restarts at step {}", step - from, from)
                           : "");
  return charged;
}

Controller::Measured Controller::explore(int64_t step, const Plan& plan, ControlledLoop& loop, bool race,
                                        const Objectives& against, double statFloor, double base) {
  Measured out;
  const Plan before = active_;
  for (int k : large_) sync_.setPlan(k, plan);
  std::vector<double> steps, syncs;
  int64_t ran = 0;  // steps trained, the untimed first included
  try {
    for (int64_t i = 0; i < opts_.exploreSteps; ++i) {
      const auto m = loop.exploreStep();
      ++ran;
      if (i == 0) continue;  // builds the compressor and its caches
      steps.push_back(m.step);
      syncs.push_back(std::max(0.0, m.step - m.compute));
      for (int k : large_) out.stats += sync_.lastWeightedStats(k);
      // The race (explore_min_steps): rank 0 stops a candidate that, on its
      // fastest step so far (a loaded host only ever slows a step down) and
      // its statistics so far, would not replace the running plan.
      if (race && int64_t(steps.size()) >= opts_.exploreMinSteps && i + 1 < opts_.exploreSteps) {
        const double fastest = comparedTime(base, *std::min_element(steps.begin(), steps.end()),
                                            *std::min_element(syncs.begin(), syncs.end()));
        const Objectives best{fastest, statCost(out.stats, plan, statFloor)};
        if (broadcastInt(comm_.rank() == 0 && !couldReplace(against, best, 0.0, opts_.timeWeight, opts_.kneeScale()))) {
          out.stopped = true;
          break;
        }
      }
    }
    // The median, like the running plan's own (median(steps_)): one step
    // disturbed by the host must not decide.
    if (!steps.empty()) {
      out.step = median(steps);
      out.sync = median(syncs);
      out.fastest = *std::min_element(steps.begin(), steps.end());
      out.time = comparedTime(base, out.step, out.sync);
    }
    out.steps = int64_t(steps.size());
    out.ok = !steps.empty();
  } catch (const NonFiniteGradient& e) {
    spdlog::warn("controller: exploring {} produced a non-finite gradient ({}); not a candidate this time", plan.key(),
                 e.what());
  }
  const std::string ranKey = sync_.plan(large_.front()).key();  // what the buckets ran, as GradSync holds it
  for (int k : large_) sync_.setPlan(k, before);
  logUndone(step, ranKey, ran, "exploration");
  return out;
}

void Controller::decide(int64_t step, const std::string& reason, ControlledLoop& loop) {
  const auto started = Clock::now();
  const int n = comm_.size();
  nlohmann::json rec{{"step", step}, {"event", "decision"}, {"trigger", reason}, {"world_size", n}};
  if (betaPending_) settleBeta(step);
  // A sharp change (afterStep) called this decision: only the running plan's
  // last betaSteps_ steps see the new link, for β (observedBetaOfRanks) and
  // for its own step time, should it stay (latest). Reset at the end.
  const auto latest = [&](const std::vector<double>& v) {
    return betaSteps_ > 0 && v.size() > size_t(betaSteps_) ? median(std::vector<double>(v.end() - betaSteps_, v.end()))
                                                           : median(v);
  };
  // The measured plans' common base (ControllerOptions::commonBase): where
  // no sync overlaps backward, forward+backward does not depend on the plan,
  // so a decision compares the plans it measured by their step − compute on
  // one base, the mean forward+backward of the running plan's steps since the
  // last decision (the predictions' too: baseStep), not by steps that each
  // carry the host's load of their own few steps.
  const double base = opts_.commonBase && !sync_.overlapsBackward() && !recent_.empty() ? meanCompute(recent_) : 0.0;
  if (base > 0) rec["common_base"] = base;
  // The running plan's step time as the decision compares it (its point in
  // step 4); exploration leaves steps_ and syncs_ alone.
  const double currentStep = steps_.empty() ? INFINITY : comparedTime(base, latest(steps_), latest(syncs_));
  const bool weighted = std::any_of(large_.begin(), large_.end(), [&](int k) { return !sync_.statWeights(k).empty(); });
  rec["geometry"] = weighted ? "optimizer" : "gradient";  // rank 0's, the one that screens and decides
  // 1. α, β when the network moved: the robust fit of the collectives observed
  // since the drift began where they identify both (several bucket sizes or
  // collectives); otherwise (one plan, one bucket: all observations share
  // their coefficients) a fresh probe, which every rank joins.
  const bool networkTrigger = reason == "network" || reason == "step_time" || reason == "sounding";
  bool networkChanged = false;
  // While the running plan is latency-bound its collectives say nothing about
  // β (they fit in a token bucket's burst; β from them would be their latency
  // noise), and the bandwidth soundings watch the link instead
  // (trainer/BandwidthSounding.h). At a network-type decision β is measured
  // afresh: an all-reduce sized for the link the latest sounding saw (its
  // effective β, latency included: a bound that errs towards a slow link and
  // a small sounding), then, while one finds the link more than twice as fast
  // as its size assumed, a bigger one, up to 3. β is the last one's (Table I
  // ring cost). Other decisions keep β. α stays. No probe, no β from the
  // collectives.
  const bool bySoundings = broadcastInt(comm_.rank() == 0 && latencyBound_ && sounding_.hasReference() ? 1 : 0) != 0;
  if (bySoundings && !networkTrigger) {
    rec["refit"] = "none: β kept (the running plan is latency-bound; the soundings watch the link)";
  } else if (bySoundings) {
    rec["alpha_before"] = net_.alpha;
    rec["beta_before"] = net_.beta;
    const double window = recent_.empty() ? 0.0 : double(opts_.soundEvery) * recentStep_ / double(recent_.size());
    double estimate = BandwidthSounding::betaOf(sounding_.latest(), BandwidthSounding::periodicBytes(n), n, 0.0);
    double beta = net_.beta;
    int64_t last = 0;
    auto& rounds = rec["soundings"] = nlohmann::json::array();
    for (int round = 0; round < 3; ++round) {
      int64_t bytes = 0;
      if (comm_.rank() == 0) {
        const int64_t want = BandwidthSounding::bytesFor(opts_.soundShare, window, estimate, n);
        bytes = last == 0 || want > 2 * last ? want : 0;
      }
      bytes = broadcastInt(bytes);
      if (bytes == 0) break;
      const double seconds = timedAllReduce(bytes);
      if (comm_.rank() == 0) {
        beta = BandwidthSounding::betaOf(seconds, bytes, n, net_.alpha);
        estimate = BandwidthSounding::betaOf(seconds, bytes, n, 0.0);
        rounds.push_back({{"bytes", bytes}, {"seconds", seconds}, {"beta", beta}});
      }
      last = bytes;
    }
    if (comm_.rank() == 0) {
      rec["sounding_change"] = sounding_.confirmedChange();
      networkChanged = std::abs(beta / net_.beta - 1) > opts_.networkDrift;
      net_.beta = beta;
    }
    rec["refit"] = "β from the bandwidth soundings (the running plan is latency-bound)";
  } else if (networkTrigger) {
    const auto before = net_;
    std::optional<comm::NetworkParams> fit;
    // After a sharp change the fitter still holds collectives of the old link.
    if (comm_.rank() == 0 && betaSteps_ == 0) fit = fitter_.fit();
    if (broadcastInt(fit && fit->beta > 0 ? 1 : 0)) {
      if (comm_.rank() == 0) net_ = *fit;
      rec["refit"] = "least squares over the observed collectives";
      if (adoptObservedBeta(opts_.networkDrift))
        rec["refit"] = "least squares for α; β from the running plan's latest collectives (slower than the fit)";
    } else {
      // α from the round trips of a tiny message (comm::probeLatency), β
      // from the running plan's collectives since the change (observedBeta:
      // the median of those well above their latency term). A token-bucket
      // shaper lets a probe's messages through at line rate up to its burst,
      // so the collectives are the better measure of β anyway; the full
      // probe (up to budget_seconds, 4 s: 3-4 s of each network decision on
      // schedule_c1 at 20 and 5 Mbit/s) only where they give none. Until
      // 11-29 α came from a fit of 1 and 4 KB round trips (quickProbe), which
      // the shaper rate-limits once its bucket is empty: 0.31 s of every
      // step-238 decision at 5 Mbit/s on schedule_c1, 0.08-0.13 s at 20 Mbit/s.
      net_.alpha = comm::probeLatency(comm_, quickProbe(opts_.probe));
      const double observed = observedBetaOfRanks();
      if (std::isfinite(observed)) {
        net_.beta = observed;
        rec["refit"] = "latency probe for α; β from the observed collectives";
      } else {
        net_ = comm::probe(comm_, opts_.probe);
        const double probed = net_.beta;
        rec["refit"] = "probe";
        // The probe can see a fast link that the running plan's collectives
        // do not (the burst): β from those, when slower, wins.
        if (adoptObservedBeta(0.0)) {
          rec["beta_probe"] = probed;
          rec["refit"] = "probe for α; β from the observed collectives (slower than the probe saw)";
        }
      }
    }
    rec["alpha_before"] = before.alpha;
    rec["beta_before"] = before.beta;
    networkChanged = std::abs(net_.beta / before.beta - 1) > opts_.networkDrift;
  } else {
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
  if (betaSteps_ > 0) rec["beta_steps"] = betaSteps_;
  rec["refit_seconds"] = since(started);  // β's settling included
  rec["alpha"] = net_.alpha;
  rec["beta"] = net_.beta;
  rec["bandwidth_mbit"] = comm::bandwidthBitsPerSec(net_) / 1e6;

  // 2. Screening on rank 0; the explored candidates go to every rank.
  std::vector<int64_t> exploreList;
  std::vector<Screened> screened;
  // The running plan as measured (its recent steps), which the candidates
  // must replace; infinite when it is re-measured.
  Objectives current{INFINITY, INFINITY};
  // Rank 0: each candidate's screened statistical cost. A plan explored for a
  // few steps, or running for fewer than min_interval steps, has not built
  // its error-feedback residual up yet: its cost is the larger of what it
  // measured and this (screenCodec's steady-state replay).
  std::vector<double> floor(candidates_.size(), 0.0);
  double activeFloor = 0;  // the running plan's
  // A network decision's knee of the predicted front, which stands for itself
  // with its predicted step (not explored): its index and (rank 0) objectives.
  int64_t predictedKnee = -1;
  Objectives kneePredicted{INFINITY, INFINITY};
  bool stale = false;      // rank 0: the running plan's recent steps straddle a network change
  if (comm_.rank() == 0) {
    const auto screenStart = Clock::now();
    // The first decision reuses the provisional step's screenings (~1 s of
    // codec runs on ResNet-20: encode/decode times and wire bits do not
    // change in 8 steps), but for the error-feedback codecs' under
    // rescreen_first; later ones screen afresh.
    std::map<std::string, Screened> fresh;
    const bool reuse = !decided_ && !provisionalScreens_.empty();
    if (reuse) {
      // rescreen_first: the error-feedback codecs' statistics on the step-2
      // gradient read the sparse ones below what they run at
      // (ControllerOptions.h); those dropped here are screened afresh on this
      // step's gradient.
      int64_t again = 0;
      if (opts_.rescreenFirst)
        for (const auto& c : candidates_)
          if (c.plan.errorFeedback()) again += int64_t(provisionalScreens_.erase(c.plan.codecKey()));
      rec["screening"] =
          again > 0 ? fmt::format("reused from the provisional step {}, the {} error-feedback codecs screened afresh",
                                  opts_.provisionalStep, again)
                    : fmt::format("reused from the provisional step {}", opts_.provisionalStep);
    }
    // gain_scope: family keeps a gain decision to the running compressor's
    // own grid: only that grid is screened, the rest left at infinity (all 97
    // default candidates took 0.6 s of each such decision on ResNet-20 at 10
    // Mbit/s).
    const bool familyOnly = reason == "gain" && opts_.gainScope == "family";
    if (familyOnly) rec["screening"] = fmt::format("the running compressor's candidates ({}) only", active_.compressor);
    // A network decision reuses the codec screenings of the last decision
    // that screened every candidate afresh, when they are at most
    // min_interval steps old (the horizon over which a running plan's
    // statistics stand without a gain decision): encode/decode seconds, wire
    // bits and statistics do not depend on the link, and the α-β
    // communication is recomputed at the new α and β. 0.45-0.67 s of codec
    // runs on ResNet-20 (schedule_c1's step-120 screenings; the step-245
    // decision took 0.86 s with its refit).
    const bool reuseLast = !reuse && !familyOnly && networkTrigger && lastScreenStep_ >= 0 &&
                           step - lastScreenStep_ <= opts_.minInterval;
    if (reuseLast) rec["screening"] = fmt::format("reused from the decision at step {}", lastScreenStep_);
    const auto pts = screenAll(baseStep(recent_), recentTimings_, screened, rec,
                               reuse ? provisionalScreens_ : reuseLast ? lastScreens_ : fresh,
                               familyOnly ? active_.compressor : std::string());
    if (!reuse && !reuseLast && !familyOnly) {
      lastScreens_ = std::move(fresh);
      lastScreenStep_ = step;
    }
    provisionalScreens_.clear();
    decidedPoints_ = pts;  // what the recheck re-prices (recheck_steps)
    rec["screen_seconds"] = since(screenStart);
    for (size_t i = 0; i < pts.size(); ++i) floor[i] = std::isfinite(pts[i].stat) ? pts[i].stat : 0.0;
    // The running plan among the candidates (candidates_.size() if not: pinned to another plan).
    const size_t self = indexOf(active_);
    // A plan that has run min_interval steps (the horizon over which its
    // statistics stand without a gain decision) has built its residual up:
    // what it measured since the last decision is its steady state, and the
    // replays of one gradient overstate that of the denser sparsifiers
    // (TopK 3.3% on ResNet-20: 0.83-0.84 screened, 0.72-0.77 running; in
    // ef_rate 1.02 against 0.26 at step 211 of a 20 Mbit/s run, which then
    // took TopK 10%, 30% slower a step; controller_ablation.md, "Screening
    // on two threads, during the soundings").
    const bool settled = planSteps_ >= opts_.minInterval;
    if (self < candidates_.size() && !settled) activeFloor = floor[self];
    rec["current_settled"] = settled;
    // A gain-triggered decision follows the gain (Pareto.h followGain): after
    // a fall only plans that compress less than the running one are
    // explored, after a rise only plans that compress more. Without it the
    // knee of the running plan's error-feedback steady state and its sparser
    // neighbours, explored for a few steps, stepped to ever sparser TopK as
    // the gain fell (experiments/results/controller_ablation.md: 1.1% → 0.4%
    // → 0.1% at 20 Mbit/s). Network-triggered decisions may move either way.
    // A "cost" decision (the recheck found the running plan costlier than
    // screened, recheck_steps) follows it the same way, towards less compression.
    auto remaining = pts;
    if (reason == "gain" || reason == "cost") {
      const double own = self < candidates_.size() ? pts[self].stat : NAN;
      const double change = reason == "cost" ? -1.0 : gainDrift_.signedChange();
      remaining = followGain(pts, own, change);  // within the family under gain_scope: family (screenAll)
      rec["direction"] = {{"gain_change", change},
                          {"scope", opts_.gainScope},
                          {"screened_cost", own},
                          {"towards", !std::isfinite(own) ? "either way (the running plan was not screened)"
                                      : change < 0        ? "less compression"
                                                          : "more compression"}};
    }
    // The knee first, then the knee of what is left, and so on.
    // After a network change the running plan's own recent steps straddle
    // the change and do not measure it (below); otherwise they do.
    // Unless the soundings just measured the link unchanged (the detector's
    // alarm was noise): then the running plan's recent steps still hold.
    const bool remeasure = networkTrigger && !(bySoundings && !networkChanged);
    stale = remeasure;
    if (networkTrigger && !remeasure) rec["remeasure"] = "no: the soundings found the link unchanged";
    // Otherwise a candidate is worth exploring only if, predicted
    // explore_margin slower, it would still replace the running plan as
    // measured: where communication is a few % of the step nothing can.
    if (!remeasure && !steps_.empty())
      current = {currentStep, statCost(recentStats_, active_, activeFloor)};
    // At a network decision the bar is the knee of the predicted front at the
    // new α and β instead, the cost model standing in for the running plan's
    // steps that straddle the change, with the model's error on the
    // challengers' side (the knee explore_margin slower): the running plan
    // stays, nothing explored, if it could replace the knee so; otherwise
    // only the candidates that could replace it so are explored, racing the
    // knee's predicted point, and the knee, not explored, stands for itself
    // with that point (adopted outright if none can challenge it). Each
    // exploration there cost 5-8 s on schedule_c1 (3 or 4 candidates, the
    // running plan re-measured), then ~4 s (the knee explored first); the
    // knee's predicted step was within 2-6% of its explored one in each of
    // the 3 runs of a708516 (TopKC b=2 at 20 Mbit/s).
    Objectives bar = current;
    double barMargin = opts_.exploreMargin;  // on the candidate's predicted time
    if (remeasure && !paretoFront(remaining).empty()) {
      const size_t knee = opts_.kneeOf(remaining);
      bar = {remaining[knee].time * (1 + opts_.exploreMargin), remaining[knee].stat};
      barMargin = 0;
      if (self < candidates_.size() && std::isfinite(pts[self].time) &&
          (self == knee || couldReplace(bar, pts[self], 0.0, opts_.timeWeight, opts_.kneeScale()))) {
        rec["kept"] = "the running plan is predicted within explore_margin of the knee at the new network";
        stale = false;  // its recent steps, the best measure there is, stand for it
        remaining.assign(remaining.size(), Objectives{INFINITY, INFINITY});
      } else {
        predictedKnee = int64_t(knee);
        kneePredicted = remaining[knee];
        rec["predicted_knee"] = {{"plan", candidates_[knee].plan.key()},
                                 {"predicted_step", kneePredicted.time},
                                 {"statistical_cost", kneePredicted.stat}};
      }
    }
    // One candidate per compressor configuration: its collectives share the
    // statistics, and the screening's best-placed one stands for them, so
    // the explored steps go to different compressors.
    auto& skipped = rec["not_explored"] = nlohmann::json::array();
    // The predicted knee counts as one of the `explore` candidates nearest
    // the knee, measured by its prediction.
    std::vector<std::string> compressors;
    int64_t budget = opts_.explore;
    if (predictedKnee >= 0) {
      remaining[size_t(predictedKnee)] = {INFINITY, INFINITY};
      compressors.push_back(candidates_[size_t(predictedKnee)].plan.codecKey());
      --budget;
    }
    while (int64_t(exploreList.size()) < budget && !paretoFront(remaining).empty()) {
      const size_t i = opts_.kneeOf(remaining);
      remaining[i] = {INFINITY, INFINITY};
      if (candidates_[i].plan == active_) continue;
      const std::string compressor = candidates_[i].plan.codecKey();
      if (std::find(compressors.begin(), compressors.end(), compressor) != compressors.end()) continue;
      if (!couldReplace(bar, pts[i], barMargin, opts_.timeWeight, opts_.kneeScale())) {
        skipped.push_back(candidates_[i].plan.key());
        continue;
      }
      exploreList.push_back(int64_t(i));
      compressors.push_back(compressor);
    }
    if (predictedKnee >= 0 && exploreList.empty())
      rec["adopted"] = "the predicted knee: no other candidate could replace it within explore_margin";
  }
  // [count, the predicted knee or -1, the candidates].
  auto list = torch::full({opts_.explore + 2}, int64_t(-1), torch::kLong);
  list[0] = int64_t(exploreList.size());
  list[1] = predictedKnee;
  for (size_t i = 0; i < exploreList.size(); ++i) list[i + 2] = exploreList[i];
  comm_.broadcast(list, 0).wait();
  exploreList.clear();
  predictedKnee = list[1].item<int64_t>();
  for (int64_t i = 0; i < list[0].item<int64_t>(); ++i) exploreList.push_back(list[i + 2].item<int64_t>());

  // 3. Exploration from an in-memory checkpoint, restored after each
  // candidate, in knee order. The race (explore_min_steps) runs against the
  // knee of what this decision knows so far (rank 0's): the running plan's
  // recent steps when they still hold, or at a network decision the
  // predicted knee's point, and every candidate explored before.
  const bool race = opts_.exploreMinSteps > 0;
  const auto t0 = Clock::now();
  const std::string snap = loop.snapshot();
  const auto keys = sync_.compressorKeys();
  std::vector<Measured> measured;
  std::vector<Objectives> sofar;
  if (std::isfinite(current.time)) sofar.push_back(current);
  if (predictedKnee >= 0 && std::isfinite(kneePredicted.time)) sofar.push_back(kneePredicted);
  for (int64_t i : exploreList) {
    const Objectives against = paretoFront(sofar).empty()
                                   ? Objectives{INFINITY, INFINITY}
                                   : sofar[opts_.kneeOf(sofar)];
    measured.push_back(explore(step, candidates_[i].plan, loop, race, against, floor[size_t(i)], base));
    if (measured.back().ok)
      sofar.push_back({measured.back().time, statCost(measured.back().stats, candidates_[i].plan, floor[size_t(i)])});
    sync_.keepOnly(keys);
    loop.restore(snap);
  }
  rec["explore_seconds"] = since(t0);

  // 4. The knee of the measured points (the current plan from its recent
  // steps) and, at a network decision, the predicted knee's point.
  int64_t chosen = -2;  // -2: keep the current plan
  double stepRef = 0, syncRef = 0;  // the chosen plan's measured step time and its step − compute
  bool measuredRefs = false;        // measured, not predicted (the predicted knee's)
  if (comm_.rank() == 0) {
    auto cj = statsJson(recentStats_);
    rec["current"] = {{"plan", active_.key()},
                      {"measured_step", steps_.empty() ? INFINITY : latest(steps_)},
                      {"measured_sync", syncs_.empty() ? INFINITY : latest(syncs_)},
                      {"time", currentStep},
                      {"vnmse", cj["vnmse"]},
                      {"gain", cj["gain"]}, {"steps", recent_.size()}, {"steps_on_plan", planSteps_},
                      {"cost", statCost(recentStats_, active_, activeFloor)}};
    std::vector<Objectives> pts;
    auto& ex = rec["explored"] = nlohmann::json::array();
    for (size_t i = 0; i < exploreList.size(); ++i) {
      const auto& m = measured[i];
      const size_t c = size_t(exploreList[i]);
      pts.push_back(m.ok ? Objectives{m.time, statCost(m.stats, candidates_[c].plan, floor[c])}
                         : Objectives{INFINITY, INFINITY});
      auto j = statsJson(m.stats);
      ex.push_back({{"plan", candidates_[exploreList[i]].plan.key()},
                    {"ok", m.ok},
                    {"measured_step", m.step},
                    {"measured_sync", m.sync},
                    {"time", m.time},
                    {"fastest_step", m.fastest},
                    {"steps", m.steps},
                    {"stopped_early", m.stopped},
                    {"predicted_step", screened[exploreList[i]].predicted},
                    {"vnmse", j["vnmse"]},
                    {"gain", j["gain"]}});
    }
    // The running plan's step time now: the median of its latest steps (its
    // mean since the last decision would hide a network that just changed),
    // unless they straddle a network change.
    const size_t own = pts.size(), knee = own + 1;
    pts.push_back(std::isfinite(currentStep) && !stale
                      ? Objectives{currentStep, statCost(recentStats_, active_, activeFloor)}
                      : Objectives{INFINITY, INFINITY});
    pts.push_back(predictedKnee >= 0 ? kneePredicted : Objectives{INFINITY, INFINITY});
    if (!paretoFront(pts).empty()) {
      const size_t k = opts_.kneeOf(pts);
      followup_ = {};
      // The prediction's split (screenAll): base + exposed sync.
      const auto split = [&](const Screened& s) {
        followup_.predicted = s.predicted;
        followup_.predictedExposed = s.exposed;
        followup_.predictedBase = s.predicted - s.exposed;
      };
      if (k < own) {
        chosen = exploreList[k];
        split(screened[size_t(chosen)]);
        syncRef = measured[k].sync;
      } else if (k == own) {
        followup_.predicted = currentStep;
        syncRef = latest(syncs_);
      } else if (k == knee) {
        // The predicted knee: its prediction is its reference, and its
        // step − compute as the steps will show it (syncs_) the predicted
        // step less the compute of the steps its base came from (baseStep).
        // Not the exposed sync alone: that leaves out the step's other
        // non-compute time (optimizer, data), and biased the step-time
        // trigger's dSync by it.
        chosen = predictedKnee;
        const auto& s = screened[size_t(chosen)];
        split(s);
        syncRef = std::max(0.0, s.predicted - meanCompute(recent_));
      }
      stepRef = pts[k].time;
      measuredRefs = k <= own;
      if (opts_.pin) {
        // Pinned, the pin runs on whatever the knee: the references are its
        // own latest steps (on the common base), and no follow-up compares another plan's
        // prediction with them.
        stepRef = currentStep;
        syncRef = syncs_.empty() ? 0.0 : latest(syncs_);
        measuredRefs = true;
      } else {
        followup_.step = step;
        followup_.explored = stepRef;
      }
      rec["references"] = {{"step", stepRef}, {"sync", syncRef}, {"measured", measuredRefs}};
    }
  }
  chosen = broadcastInt(chosen);
  const Plan pick = chosen >= 0 ? candidates_[chosen].plan : active_;
  rec["chosen"] = pick.key();
  rec["pinned"] = bool(opts_.pin);
  if (chosen >= 0 && !opts_.pin) {
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
  measuredRefs_ = measuredRefs && std::isfinite(stepRef) && stepRef > 0;
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
  recheckStats_ = {};
  recheckDue_ = opts_.recheckSteps > 0 && !opts_.pin && reason != "cost";
  costTriggered_ = false;
  ++decisions_;
  betaSteps_ = 0;
  rec["seconds"] = since(started);  // all of it: refit, screening, exploration (charged to training time)
  writeDecision(rec.dump());
  spdlog::info("controller: step {} ({} trigger): {} {} after exploring {} plans in {:.1f} s", step, reason,
               opts_.pin ? "would pick" : "picked", pick.key(), exploreList.size(),
               rec["explore_seconds"].get<double>());
}

}  // namespace gradzip::trainer
