// Implements data/DataLoader.h.
#include "data/DataLoader.h"

#include "util/Error.h"

namespace gradzip::data {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, int rank, int worldSize, LoaderOptions o)
    : dataset_(std::move(dataset)), rank_(rank), options_(o),
      sampler_(SamplerOptions{dataset_->size(), rank, worldSize, o.batchSize, o.shuffle, o.dropLast, o.seed}) {}

DataLoader::~DataLoader() = default;

void DataLoader::startEpoch(int64_t epoch) { restore({epoch, 0}); }

void DataLoader::restore(const SamplerState& state) {
  prefetcher_.reset();  // join the old workers before the shard they read changes
  sampler_.restore(state);
  // The producers read a frozen copy of the sampler (this epoch's shard), never
  // sampler_ itself, which the consumer keeps advancing.
  auto frozen = std::make_shared<const DistributedSampler>(sampler_);
  auto dataset = dataset_;
  const uint64_t seed = options_.seed, epoch = uint64_t(state.epoch), rank = uint64_t(rank_);
  auto produce = [=](int64_t step) {
    Rng rng = Rng::derive({seed, epoch, rank, uint64_t(step)});
    return dataset->getBatch(frozen->batch(step), rng);
  };
  prefetcher_ = std::make_unique<Prefetcher>(state.position, sampler_.stepsPerEpoch(), produce, options_.prefetch,
                                             options_.workers);
}

std::optional<Batch> DataLoader::next() {
  GZ_ASSERT(prefetcher_ != nullptr, "DataLoader::next() before startEpoch()");
  std::optional<Batch> b = prefetcher_->next();
  if (b) sampler_.next();  // keep the sampler's position (the checkpointed state) in step
  return b;
}

double DataLoader::lastWaitSeconds() const { return prefetcher_ ? prefetcher_->lastWaitSeconds() : 0.0; }

}  // namespace gradzip::data
