// One rank's stream of training (or evaluation) batches: a Dataset, a
// DistributedSampler choosing this rank's indices, and a Prefetcher building the
// batches in the background. The randomness of the batch for step s of epoch e
// on rank r comes from Rng::derive({seed, e, r, s}), so it does not depend on
// which worker thread built it, and a run resumed from a saved SamplerState gets
// exactly the batches of the uninterrupted run.
#pragma once

#include "data/Dataset.h"
#include "data/DistributedSampler.h"
#include "data/Prefetcher.h"

#include <memory>
#include <optional>

namespace gradzip::data {

struct LoaderOptions {
  int64_t batchSize = 128;  // per rank
  bool shuffle = true;
  bool dropLast = true;
  int prefetch = 2;  // batches built ahead; 0 = synchronously in next()
  int workers = 1;   // producer threads
  uint64_t seed = 0;
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, int rank, int worldSize, LoaderOptions options);
  ~DataLoader();

  // Starts epoch `epoch` at its first step (begins prefetching at once).
  void startEpoch(int64_t epoch);
  // Continues from a checkpointed state: the next batch is step state.position of state.epoch.
  void restore(const SamplerState& state);
  // The next batch of the current epoch, or nullopt when it is over.
  std::optional<Batch> next();

  // The steps consumed so far (save this in checkpoints).
  SamplerState state() const { return sampler_.state(); }
  int64_t stepsPerEpoch() const { return sampler_.stepsPerEpoch(); }
  // Seconds the last next() waited for its batch: the per-step "data wait".
  double lastWaitSeconds() const;
  const Dataset& dataset() const { return *dataset_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  int rank_;
  LoaderOptions options_;
  DistributedSampler sampler_;
  std::unique_ptr<Prefetcher> prefetcher_;
};

}  // namespace gradzip::data
