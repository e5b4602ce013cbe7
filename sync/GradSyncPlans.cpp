// Implements the plan side of sync/GradSync.h: the cross-rank finiteness
// check before each bucket's plan runs (sync/BucketSync.h runs the plan), the
// per-bucket time split, switching plans, the measuring geometry, and the
// compressor state of every (bucket, plan) for snapshots and checkpoints.
#include "sync/GradSync.h"

#include "util/Error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace gradzip::trainer {
double GradSync::residualNorm() const {
  double sq = 0;
  for (const auto& b : buckets_) {
    const double n = b.sync->residualNorm();
    sq += n * n;
  }
  return std::sqrt(sq);
}

void GradSync::syncBucket(Bucket& b) {
  const int index = static_cast<int>(&b - buckets_.data());
  // Agree on finiteness first (a 1-element MAX all-reduce) so every rank
  // applies the NaN policy at the same bucket instead of hanging.
  if (opts_.checkFinite && !BucketSync::finiteOnEveryRank(b.flat, comm_)) {
    const auto bad = b.sync->nonFiniteTensors(b.flat);
    throw NonFiniteGradient(step_, bad.empty() ? fmt::format("bucket {} on another rank", index)
                                               : fmt::format("rank {}: {}", comm_.rank(), fmt::join(bad, ", ")));
  }
  const double handover = b.last.handover;  // set when the bucket was handed over
  b.last = b.sync->run(b.flat, comm_, opts_.seed, step_, measure_).breakdown();
  b.last.handover = handover;
}

void GradSync::setStatScale(const std::function<std::optional<double>(const torch::Tensor& param)>& scaleOf) {
  GZ_ASSERT(!inStep_, "the measuring geometry changes between steps only");
  for (auto& b : buckets_) {
    std::vector<double> weights(b.params.size(), 1.0);
    bool any = false;
    for (size_t j = 0; j < b.params.size(); ++j)
      if (const auto s = scaleOf(params_[b.params[j]].second)) {
        weights[j] = *s * *s;
        any = true;
      }
    b.sync->setWeights(any ? std::move(weights) : std::vector<double>{});
  }
}

void GradSync::setPlan(const Plan& plan) {
  for (int k = 0; k < numBuckets(); ++k) setPlan(k, plan);
}

void GradSync::setPlan(int bucket, const Plan& plan) {
  GZ_ASSERT(!inStep_, "plans change between steps only");
  buckets_.at(bucket).sync->setPlan(plan);
}

std::vector<std::vector<std::string>> GradSync::compressorKeys() const {
  std::vector<std::vector<std::string>> keys;
  for (const auto& b : buckets_) keys.push_back(b.sync->compressorKeys());
  return keys;
}

void GradSync::keepOnly(const std::vector<std::vector<std::string>>& keys) {
  GZ_ASSERT(keys.size() == buckets_.size(), "keepOnly: {} key lists for {} buckets", keys.size(), buckets_.size());
  for (size_t k = 0; k < buckets_.size(); ++k) buckets_[k].sync->keepOnly(keys[k]);
}

void GradSync::save(torch::serialize::OutputArchive& ar) const {
  for (const auto& b : buckets_) b.sync->save(ar);
}

void GradSync::load(torch::serialize::InputArchive& ar) {
  for (auto& b : buckets_) b.sync->load(ar);
}

}  // namespace gradzip::trainer
