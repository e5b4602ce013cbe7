// Implements the controller's screening (controller/Controller.h): each
// compressor configuration's codec run on rank 0 over the large buckets' last
// gradients (encode/decode seconds, wire bits, statistics; an error-feedback
// codec over screen_reps replays, its steady state), each candidate's
// predicted step from the α-β model and the overlap model, and a decision's
// shortlist of candidates to explore near the knee of the predicted front.
#include "controller/Controller.h"

#include "controller/ControllerDecision.h"
#include "controller/ControllerDetail.h"
#include "compress/Factory.h"
#include "controller/PlanCost.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h, controller/ControllerDecision.h

namespace {
// Coordinates the steady-state replay of an error-feedback codec runs on:
// the large buckets in order, up to this many (at least one bucket). The
// statistic is a ratio of sums, which a sample of buckets estimates; 2^20
// keeps R replays of the ~30 codec configurations near a second at BERT or
// VGG sizes, and covers every ResNet-20 bucket.
constexpr int64_t kSteadyStateCoordinates = int64_t(1) << 20;
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

Controller::Screened Controller::screenCodec(const Plan& plan) {
  Screened s;
  // An error-feedback codec's sequence: screen_reps replays of the last gradient.
  const auto steady = steadyStateBuckets();
  const int64_t calls = std::max<int64_t>(2, opts_.screenReps);
  try {
    const bool fed = plan.errorFeedback();
    for (int k : large_) {
      // A fresh codec per bucket: an error-feedback residual belongs to one bucket.
      const auto codec = freshCodec(plan);
      auto& c = *codec;
      // This rank's last local gradient (the aggregated mean would already
      // carry the current plan's rounding).
      const auto& last = sync_.lastInput(k).defined() ? sync_.lastInput(k) : sync_.bucketGradient(k);
      const int64_t d = last.numel();
      const bool replay = fed && std::find(steady.begin(), steady.end(), k) != steady.end();
      const int64_t reps = replay ? calls : 2;
      for (int64_t rep = 0; rep < reps; ++rep) {
        // Each call a step of its own: shared-seed randomness (THC's
        // rotation and rounding) drawn afresh, as in training, so its errors
        // do not add up coherently in the residual.
        compress::Context ctx{local_, nullptr, plan.collective, sync_.bucketLayout(k), 0, k, rep, nullptr};
        // The compressor's input, the residual included (as GradSync measures
        // the running plan), before encode() moves the residual on.
        const at::Tensor in = c.residual().defined() ? last + c.residual() : last;
        const auto t0 = Clock::now();
        auto p = c.encode(last, ctx);
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
  // The pipeline's inputs (controller/OverlapModel.h).
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

void Controller::shortlist(Decision& d) {
  const auto screenStart = Clock::now();
  // The first decision reuses the provisional step's screenings:
  // encode/decode times and wire bits do not change within the warm-up.
  // Later ones screen afresh.
  std::map<std::string, Screened> fresh;
  const bool reuse = phase_ != Phase::Decided && !provisionalScreens_.empty();
  if (reuse) d.rec["screening"] = fmt::format("reused from the provisional step {}", opts_.provisionalStep);
  // gain_scope: family keeps a gain decision to the running compressor's
  // own grid: only that grid is screened, the rest left at infinity.
  const bool familyOnly = d.reason == "gain" && opts_.gainScope == "family";
  if (familyOnly) d.rec["screening"] = fmt::format("the running compressor's candidates ({}) only", active_.compressor);
  // A network decision reuses the codec screenings of the last decision
  // that screened every candidate afresh, when they are at most
  // min_interval steps old (the horizon over which a running plan's
  // statistics stand without a gain decision): encode/decode seconds, wire
  // bits and statistics do not depend on the link, and the α-β
  // communication is recomputed at the new α and β.
  const bool reuseLast = !reuse && !familyOnly && d.networkTrigger && lastScreenStep_ >= 0 &&
                         d.step - lastScreenStep_ <= opts_.minInterval;
  if (reuseLast) d.rec["screening"] = fmt::format("reused from the decision at step {}", lastScreenStep_);
  const auto pts = screenAll(baseStep(recent_), recentTimings_, d.screened, d.rec,
                             reuse ? provisionalScreens_ : reuseLast ? lastScreens_ : fresh,
                             familyOnly ? active_.compressor : std::string());
  if (!reuse && !reuseLast && !familyOnly) {
    lastScreens_ = std::move(fresh);
    lastScreenStep_ = d.step;
  }
  provisionalScreens_.clear();
  d.rec["screen_seconds"] = since(screenStart);
  for (size_t i = 0; i < pts.size(); ++i) d.floor[i] = std::isfinite(pts[i].stat) ? pts[i].stat : 0.0;
  // The running plan among the candidates (candidates_.size() if not: pinned to another plan).
  const size_t self = indexOf(active_);
  // A plan that has run min_interval steps (the horizon over which its
  // statistics stand without a gain decision) has built its residual up:
  // what it measured since the last decision is its steady state, and the
  // replays of one gradient overstate that of the denser sparsifiers
  // (controller_ablation.md, "The running plan's settled cost").
  const bool settled = planSteps_ >= opts_.minInterval;
  if (self < candidates_.size() && !settled) d.activeFloor = d.floor[self];
  d.rec["current_settled"] = settled;
  // A gain-triggered decision follows the gain (Pareto.h followGain): after
  // a fall only plans that compress less than the running one are
  // explored, after a rise only plans that compress more. Without it the
  // knee of the running plan's error-feedback steady state and its sparser
  // neighbours, explored for a few steps, stepped to ever sparser TopK as
  // the gain fell (controller_ablation.md, "Gain decisions follow the
  // gain"). Network-triggered decisions may move either way.
  auto remaining = pts;
  if (d.reason == "gain") {
    const double own = self < candidates_.size() ? pts[self].stat : NAN;
    const double change = gainDrift_.signedChange();
    remaining = followGain(pts, own, change);  // within the family under gain_scope: family (screenAll)
    d.rec["direction"] = {{"gain_change", change},
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
  const bool remeasure = d.networkTrigger && !(d.bySoundings && !d.networkChanged);
  d.stale = remeasure;
  if (d.networkTrigger && !remeasure) d.rec["remeasure"] = "no: the soundings found the link unchanged";
  // Otherwise a candidate is worth exploring only if, predicted
  // explore_margin slower, it would still replace the running plan as
  // measured: where communication is a few % of the step nothing can.
  if (!remeasure && !steps_.empty())
    d.current = {d.currentStep, statCost(recentStats_, active_, d.activeFloor)};
  // At a network decision the bar is the knee of the predicted front at the
  // new α and β instead, the cost model standing in for the running plan's
  // steps that straddle the change, with the model's error on the
  // challengers' side (the knee explore_margin slower): the running plan
  // stays, nothing explored, if it could replace the knee so; otherwise
  // only the candidates that could replace it so are explored, racing the
  // knee's predicted point, and the knee, not explored, stands for itself
  // with that point (adopted outright if none can challenge it): exploring
  // the running plan again there costs seconds, and the knee's prediction is
  // close to its explored step (controller_ablation.md, "Screening the
  // steady state, and network decisions that trust the model").
  Objectives bar = d.current;
  double barMargin = opts_.exploreMargin;  // on the candidate's predicted time
  if (remeasure && !paretoFront(remaining).empty()) {
    const size_t knee = opts_.kneeOf(remaining);
    bar = {remaining[knee].time * (1 + opts_.exploreMargin), remaining[knee].stat};
    barMargin = 0;
    if (self < candidates_.size() && std::isfinite(pts[self].time) &&
        (self == knee || couldReplace(bar, pts[self], 0.0, opts_.timeWeight, opts_.kneeScale()))) {
      d.rec["kept"] = "the running plan is predicted within explore_margin of the knee at the new network";
      d.stale = false;  // its recent steps, the best measure there is, stand for it
      remaining.assign(remaining.size(), Objectives{INFINITY, INFINITY});
    } else {
      d.predictedKnee = int64_t(knee);
      d.kneePredicted = remaining[knee];
      d.rec["predicted_knee"] = {{"plan", candidates_[knee].plan.key()},
                               {"predicted_step", d.kneePredicted.time},
                               {"statistical_cost", d.kneePredicted.stat}};
    }
  }
  // One candidate per compressor configuration: its collectives share the
  // statistics, and the screening's best-placed one stands for them, so
  // the explored steps go to different compressors.
  auto& skipped = d.rec["not_explored"] = nlohmann::json::array();
  // The predicted knee counts as one of the `explore` candidates nearest
  // the knee, measured by its prediction.
  std::vector<std::string> compressors;
  int64_t budget = opts_.explore;
  if (d.predictedKnee >= 0) {
    remaining[size_t(d.predictedKnee)] = {INFINITY, INFINITY};
    compressors.push_back(candidates_[size_t(d.predictedKnee)].plan.codecKey());
    --budget;
  }
  while (int64_t(d.exploreList.size()) < budget && !paretoFront(remaining).empty()) {
    const size_t i = opts_.kneeOf(remaining);
    remaining[i] = {INFINITY, INFINITY};
    if (candidates_[i].plan == active_) continue;
    const std::string compressor = candidates_[i].plan.codecKey();
    if (std::find(compressors.begin(), compressors.end(), compressor) != compressors.end()) continue;
    if (!couldReplace(bar, pts[i], barMargin, opts_.timeWeight, opts_.kneeScale())) {
      skipped.push_back(candidates_[i].plan.key());
      continue;
    }
    d.exploreList.push_back(int64_t(i));
    compressors.push_back(compressor);
  }
  if (d.predictedKnee >= 0 && d.exploreList.empty())
    d.rec["adopted"] = "the predicted knee: no other candidate could replace it within explore_margin";
}

}  // namespace gradzip::trainer
