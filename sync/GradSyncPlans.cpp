// Implements the plan side of sync/GradSync.h: running one bucket's plan on
// the communication thread (the cross-rank finiteness check, the compressor
// and collective of its plan, the error-feedback hand-over when the plan
// changed, measuring), switching plans, the measuring geometry, and the
// compressor state of every (bucket, plan) for snapshots and checkpoints.
#include "sync/GradSync.h"

#include "util/Error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace gradzip::trainer {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

double GradSync::residualNorm() const {
  double sq = 0;
  for (const auto& b : buckets_) {
    auto it = b.compressors.find(b.key);
    if (it == b.compressors.end()) continue;
    const double n = it->second->residualNorm();
    sq += n * n;
  }
  return std::sqrt(sq);
}

compress::Compressor& GradSync::compressorFor(Bucket& b) {
  const std::string& key = b.key;
  auto it = b.compressors.find(key);
  if (it != b.compressors.end()) return *it->second;
  auto c = b.plan.makeCompressor();
  auto caps = c->capabilities();
  GZ_CHECK(std::find(caps.collectives.begin(), caps.collectives.end(), b.plan.collective) != caps.collectives.end(),
           "plan {}: compressor {} does not support collective '{}' (supported: {})", key, b.plan.compressor,
           b.plan.collective, fmt::join(caps.collectives, ", "));
  return *(b.compressors[key] = std::move(c));
}

void GradSync::syncBucket(Bucket& b) {
  const int index = static_cast<int>(&b - buckets_.data());
  auto& c = compressorFor(b);
  comm::Collective* coll = nullptr;
  const std::string& cname = b.plan.collective;
  if (cname != "engine" && cname != "allgather") {
    auto& slot = b.collectives[cname];
    if (!slot) slot = comm::makeCollective(cname, comm_);
    coll = slot.get();
  }
  if (opts_.checkFinite) {
    // Agree on finiteness first (a 1-element MAX all-reduce) so every rank
    // applies the NaN policy at the same bucket instead of hanging.
    const bool finite = at::isfinite(b.flat).all().item<bool>();
    auto flag = torch::full({1}, finite ? 0.0f : 1.0f);
    comm_.allReduce(flag, comm::ReduceOp::Max).wait();
    if (flag.item<float>() > 0) {
      std::vector<std::string> bad;
      for (int i : b.params)
        if (!at::isfinite(b.flat.narrow(0, offsetOf_[i], params_[i].second.numel())).all().item<bool>())
          bad.push_back(params_[i].first);
      throw NonFiniteGradient(step_, bad.empty() ? fmt::format("bucket {} on another rank", index)
                                                 : fmt::format("rank {}: {}", comm_.rank(), fmt::join(bad, ", ")));
    }
  }
  if (!b.lastKey.empty() && b.lastKey != b.key) handOverResidual(b, c);
  b.lastKey = b.key;
  compress::PhaseTimes times;
  compress::Context ctx{comm_, coll, cname, b.layout, opts_.seed, index, step_, &times};
  // The error-fed input, before aggregate() moves the residual on.
  // Buffers are kept per bucket: measuring runs every step under the controller.
  torch::Tensor input;
  if (measure_) {
    if (!b.input.defined()) {
      b.input = torch::empty_like(b.flat);
      b.scratch = torch::empty_like(b.flat);
    }
    b.input.copy_(b.flat);
    input = c.residual().defined() ? at::add_out(b.scratch, b.flat, c.residual()) : b.input;
  }
  const auto t0 = Clock::now();
  auto agg = c.aggregate(b.flat, ctx);
  const double total = since(t0);
  b.stats = b.weighted = {};
  if (measure_ && agg.localApplied.defined()) {
    const auto m = measureCompression(input, agg.localApplied.to(torch::kFloat).reshape(-1), b.layout, b.weights,
                                      b.scratch);
    b.stats = m.plain;
    b.weighted = m.weighted;
  }
  b.flat.copy_(agg.mean);
  b.last.encode = times.encode;
  b.last.decode = times.decode;
  // Compressors that do not split their time report it all as communication.
  b.last.communicate = times.communicate > 0 ? times.communicate : std::max(0.0, total - times.encode - times.decode);
  b.last.bytesSent = times.bytesSent;
  b.last.saturated = agg.saturated;
}

void GradSync::handOverResidual(Bucket& b, compress::Compressor& to) {
  const auto it = b.compressors.find(b.lastKey);
  if (it == b.compressors.end()) return;
  const at::Tensor e = it->second->takeResidual();
  if (!e.defined()) return;
  if (!to.addResidual(e)) b.flat.add_(e);
}
void GradSync::setStatScale(const std::function<std::optional<double>(const torch::Tensor& param)>& scaleOf) {
  GZ_ASSERT(!inStep_, "the measuring geometry changes between steps only");
  for (auto& b : buckets_) {
    b.weights.assign(b.params.size(), 1.0);
    bool any = false;
    for (size_t j = 0; j < b.params.size(); ++j)
      if (const auto s = scaleOf(params_[b.params[j]].second)) {
        b.weights[j] = *s * *s;
        any = true;
      }
    if (!any) b.weights.clear();
  }
}

void GradSync::setPlan(const Plan& plan) {
  for (int k = 0; k < numBuckets(); ++k) setPlan(k, plan);
}

void GradSync::setPlan(int bucket, const Plan& plan) {
  GZ_ASSERT(!inStep_, "plans change between steps only");
  auto& b = buckets_.at(bucket);
  b.plan = plan;
  b.key = plan.key();
}

std::vector<std::vector<std::string>> GradSync::compressorKeys() const {
  std::vector<std::vector<std::string>> keys;
  for (const auto& b : buckets_) {
    keys.emplace_back();
    for (const auto& kv : b.compressors) keys.back().push_back(kv.first);
  }
  return keys;
}

void GradSync::keepOnly(const std::vector<std::vector<std::string>>& keys) {
  GZ_ASSERT(keys.size() == buckets_.size(), "keepOnly: {} key lists for {} buckets", keys.size(), buckets_.size());
  for (size_t k = 0; k < buckets_.size(); ++k) {
    auto& cs = buckets_[k].compressors;
    for (auto it = cs.begin(); it != cs.end();)
      it = std::find(keys[k].begin(), keys[k].end(), it->first) == keys[k].end() ? cs.erase(it) : std::next(it);
  }
}

void GradSync::save(torch::serialize::OutputArchive& ar) const {
  for (int k = 0; k < numBuckets(); ++k) {
    for (const auto& [key, c] : buckets_[k].compressors) {
      torch::serialize::OutputArchive sub;
      c->save(sub);
      ar.write(fmt::format("bucket{}/{}", k, key), sub);
    }
    ar.write(fmt::format("bucket{}/last_plan", k), c10::IValue(buckets_[k].lastKey));
  }
}

void GradSync::load(torch::serialize::InputArchive& ar) {
  for (int k = 0; k < numBuckets(); ++k) {
    auto& b = buckets_[k];
    compressorFor(b);  // the active plan's state must be restorable even before its first step
    for (auto& [key, c] : b.compressors) {
      torch::serialize::InputArchive sub;
      if (ar.try_read(fmt::format("bucket{}/{}", k, key), sub)) c->load(sub);
    }
    // Checkpoints from before the hand-over have none: no hand-over at the first step.
    c10::IValue last;
    b.lastKey = ar.try_read(fmt::format("bucket{}/last_plan", k), last) && last.isString() ? last.toStringRef() : "";
  }
}

}  // namespace gradzip::trainer
