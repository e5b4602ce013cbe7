// Implements data/DistributedSampler.h.
#include "data/DistributedSampler.h"

#include "data/Rng.h"
#include "util/Error.h"

#include <numeric>

namespace gradzip::data {
namespace {
constexpr uint64_t kShuffleStream = 0x5348554646ULL;  // "SHUFF": keeps shuffles apart from other Rng uses
}

DistributedSampler::DistributedSampler(SamplerOptions o) : options_(o) {
  GZ_CHECK(o.worldSize >= 1 && o.rank >= 0 && o.rank < o.worldSize, "sampler: rank {} outside world of size {}",
           o.rank, o.worldSize);
  GZ_CHECK(o.batchSize >= 1, "sampler: batch size must be >= 1, got {}", o.batchSize);
  GZ_CHECK(o.datasetSize >= 1, "sampler: the dataset is empty");
  const int64_t n = o.datasetSize, w = o.worldSize;
  samplesPerRank_ = o.dropLast ? n / w : (n + w - 1) / w;
  steps_ = o.dropLast ? samplesPerRank_ / o.batchSize : (samplesPerRank_ + o.batchSize - 1) / o.batchSize;
  GZ_CHECK(steps_ >= 1,
           "sampler: {} examples over {} ranks give {} per rank, fewer than one batch of {} (lower batch_size "
           "or set drop_last: false)",
           n, w, samplesPerRank_, o.batchSize);
  setEpoch(0);
}

void DistributedSampler::setEpoch(int64_t epoch) { restore({epoch, 0}); }

void DistributedSampler::restore(const SamplerState& s) {
  GZ_CHECK(s.epoch >= 0 && s.position >= 0 && s.position <= steps_,
           "sampler: cannot restore epoch {} position {} (an epoch has {} steps)", s.epoch, s.position, steps_);
  state_ = s;
  const int64_t n = options_.datasetSize, w = options_.worldSize;
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  if (options_.shuffle) {
    // Fisher-Yates written out: identical on every rank, since all derive the same Rng.
    Rng rng = Rng::derive({options_.seed, kShuffleStream, uint64_t(s.epoch)});
    for (int64_t i = n - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[rng.uniformInt(uint64_t(i + 1))]);
  }
  shard_.resize(size_t(samplesPerRank_));
  // Position k of the padded/truncated permutation is perm[k mod n]: padding wraps around.
  for (int64_t j = 0; j < samplesPerRank_; ++j) shard_[size_t(j)] = perm[size_t((options_.rank + j * w) % n)];
}

std::vector<int64_t> DistributedSampler::batch(int64_t step) const {
  GZ_ASSERT(step >= 0 && step < steps_, "step {} outside [0, {})", step, steps_);
  int64_t begin = step * options_.batchSize;
  int64_t end = std::min(begin + options_.batchSize, samplesPerRank_);
  return {shard_.begin() + begin, shard_.begin() + end};
}

std::vector<int64_t> DistributedSampler::next() {
  GZ_ASSERT(hasNext(), "sampler: epoch {} is exhausted", state_.epoch);
  return batch(state_.position++);
}

}  // namespace gradzip::data
