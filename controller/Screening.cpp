// Implements controller/Screening.h: each compressor configuration's codec run
// over the large buckets' last gradients (encode/decode seconds, wire bits,
// statistics; an error-feedback codec over screen_reps replays, its steady
// state), and each candidate's predicted step from the α-β model and the
// overlap model.
#include "controller/Screening.h"

#include "compress/Factory.h"
#include "controller/ControllerDetail.h"
#include "controller/PlanCost.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h

namespace {
// Coordinates the steady-state replay of an error-feedback codec runs on:
// the large buckets in order, up to this many (at least one bucket). The
// statistic is a ratio of sums, which a sample of buckets estimates, so the
// replays' cost stops growing with the model; 2^20 covers every ResNet-20
// bucket (controller_ablation.md, "Screening the steady state").
constexpr int64_t kSteadyStateCoordinates = int64_t(1) << 20;
}  // namespace

Screening::Screening(const ControllerOptions& opts, const std::vector<Candidate>& candidates,
                     const std::vector<int>& large, const SyncedBuckets& sync, int worldSize)
    : opts_(opts), candidates_(candidates), large_(large), sync_(sync), worldSize_(worldSize) {}

Screening::~Screening() = default;

std::vector<int> Screening::steadyStateBuckets() const {
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

Screened Screening::codec(const Plan& plan) {
  Screened s;
  // An error-feedback codec's sequence: screen_reps replays of the last gradient.
  const auto steady = steadyStateBuckets();
  const int64_t calls = std::max<int64_t>(2, opts_.screenReps);
  try {
    const bool fed = plan.errorFeedback();
    for (int k : large_) {
      // A fresh codec per bucket: an error-feedback residual belongs to one bucket.
      const auto codec = plan.makeCompressor();
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
          s.bucketBits.push_back(c.bitsPerCoordinate(d, worldSize_));
          s.bucketDownBits.push_back(c.downlinkBitsPerCoordinate(d, worldSize_));
        }
      }
    }
    s.ok = true;
  } catch (const std::exception& e) {
    spdlog::debug("controller: screening {} failed: {}", plan.key(), firstLine(e.what()));
  }
  return s;
}

std::vector<Objectives> Screening::all(double base, const OverlapTimings& timing, const comm::NetworkParams& net,
                                       std::vector<Screened>& screened, nlohmann::json& rec,
                                       std::map<std::string, Screened>& byCodec, const std::string& onlyCompressor) {
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
  // them): those ahead() started, or all of them from here.
  if (!ahead_) ahead(byCodec, onlyCompressor, 0);
  ahead_->work->ensureWorkers(int(opts_.screenThreads) - 1);
  ahead_->work->finish();
  for (size_t i = 0; i < ahead_->plans.size(); ++i)
    byCodec.emplace(ahead_->plans[i].codecKey(), std::move(ahead_->results[i]));
  rec["screen_threads"] = opts_.screenThreads;
  rec["codecs_screened"] = ahead_->plans.size();
  ahead_.reset();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const Plan& plan = candidates_[i].plan;
    if (!onlyCompressor.empty() && plan.compressor != onlyCompressor) {
      cands.push_back({{"plan", plan.key()}, {"ok", false}, {"screened", false}});
      continue;
    }
    const auto it = byCodec.find(plan.codecKey());
    GZ_ASSERT(it != byCodec.end(), "Screening::all: {} was not screened", plan.key());
    auto& s = screened[i];
    s = it->second;
    if (s.ok) {
      // Per large bucket its encode/decode and α-β communication.
      std::vector<double> work;
      for (size_t j = 0; j < large_.size(); ++j) {
        const int64_t d = sync_.bucketNumel(large_[j]);
        const double comm =
            planSeconds(planCoefficients(plan, s.bucketBits[j], d, worldSize_, s.bucketDownBits[j]), net);
        s.comm += comm;
        s.bits += s.bucketBits[j] * double(d);
        work.push_back(s.bucketEncodeDecode[j] + comm);
      }
      s.bits /= double(std::max<int64_t>(1, total));
      s.exposed = overlap.exposed(work);
      s.predicted = base + s.exposed;
      pts[i] = {s.predicted, statCost(opts_, s.stats, plan)};
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

void Screening::ahead(const std::map<std::string, Screened>& byCodec, const std::string& onlyCompressor,
                      int background) {
  auto s = std::make_unique<Ahead>();
  std::set<std::string> keys;
  for (const auto& c : candidates_) {
    if (!onlyCompressor.empty() && c.plan.compressor != onlyCompressor) continue;
    const auto key = c.plan.codecKey();
    if (byCodec.count(key) || !keys.insert(key).second) continue;
    s->plans.push_back(c.plan);
    s->plans.back().options = YAML::Clone(c.plan.options);
  }
  s->results.resize(s->plans.size());
  Ahead* raw = s.get();
  s->work = std::make_unique<WorkAhead>(raw->plans.size(), background,
                                        [this, raw](size_t i) { raw->results[i] = codec(raw->plans[i]); });
  ahead_ = std::move(s);
}

void Screening::startProvisional(int background) {
  provisional_.clear();
  ahead(provisional_, "", background);
}

std::optional<size_t> Screening::screenedAhead() const {
  if (!ahead_) return std::nullopt;
  return ahead_->work->done();
}

std::vector<Objectives> Screening::provisional(double base, const OverlapTimings& timing,
                                               const comm::NetworkParams& net, std::vector<Screened>& screened,
                                               nlohmann::json& rec) {
  if (!ahead_) provisional_.clear();
  return all(base, timing, net, screened, rec, provisional_);
}

std::vector<Objectives> Screening::decision(int64_t step, bool first, bool network, const std::string& onlyCompressor,
                                            double base, const OverlapTimings& timing,
                                            const comm::NetworkParams& net, std::vector<Screened>& screened,
                                            nlohmann::json& rec) {
  const auto t0 = Clock::now();
  // The first decision reuses the provisional step's screenings:
  // encode/decode times and wire bits do not change within the warm-up.
  // Later ones screen afresh.
  std::map<std::string, Screened> fresh;
  const bool reuse = first && !provisional_.empty();
  if (reuse) rec["screening"] = fmt::format("reused from the provisional step {}", opts_.provisionalStep);
  const bool familyOnly = !onlyCompressor.empty();
  if (familyOnly) rec["screening"] = fmt::format("the running compressor's candidates ({}) only", onlyCompressor);
  // A network decision reuses the codec screenings of the last decision
  // that screened every candidate afresh, when they are at most
  // min_interval steps old (the horizon over which a running plan's
  // statistics stand without a gain decision): encode/decode seconds, wire
  // bits and statistics do not depend on the link, and the α-β
  // communication is recomputed at the new α and β.
  const bool reuseLast = !reuse && !familyOnly && network && lastStep_ >= 0 && step - lastStep_ <= opts_.minInterval;
  if (reuseLast) rec["screening"] = fmt::format("reused from the decision at step {}", lastStep_);
  const auto pts = all(base, timing, net, screened, rec, reuse ? provisional_ : reuseLast ? last_ : fresh,
                       onlyCompressor);
  if (!reuse && !reuseLast && !familyOnly) {
    last_ = std::move(fresh);
    lastStep_ = step;
  }
  provisional_.clear();
  rec["screen_seconds"] = since(t0);
  return pts;
}

}  // namespace gradzip::trainer
