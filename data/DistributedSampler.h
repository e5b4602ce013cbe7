// Splits a dataset's indices among data-parallel ranks, one epoch at a time, as
// torch.utils.data.DistributedSampler does: every rank draws the same
// epoch-seeded permutation and takes the strided shard perm[rank], perm[rank+W],
// ... . The permutation is padded (wrapping around) or truncated to a multiple of
// the world size W, so every rank has the same number of samples and of steps,
// which collectives need. Without padding the shards are disjoint; padding
// repeats at most W-1 indices. State (epoch, steps consumed) is saved in
// checkpoints so a resumed run continues with the same batches.
#pragma once

#include <cstdint>
#include <vector>

namespace gradzip::data {

struct SamplerOptions {
  int64_t datasetSize = 0;
  int rank = 0;
  int worldSize = 1;
  int64_t batchSize = 1;  // per rank
  bool shuffle = true;
  // true: truncate to floor(N/W) samples per rank and drop a final partial batch
  // (every batch full; training). false: pad to ceil(N/W) and keep a partial last
  // batch (every example seen; evaluation).
  bool dropLast = false;
  uint64_t seed = 0;
};

struct SamplerState {
  int64_t epoch = 0;
  int64_t position = 0;  // steps of `epoch` already handed out
};

class DistributedSampler {
 public:
  // Throws UserError for rank outside [0, W), batchSize < 1, or a dataset too
  // small to give every rank one batch.
  explicit DistributedSampler(SamplerOptions options);

  // Starts epoch `epoch` at step 0 (reshuffles with a seed derived from (seed, epoch)).
  void setEpoch(int64_t epoch);
  int64_t epoch() const { return state_.epoch; }

  int64_t samplesPerRank() const { return samplesPerRank_; }
  int64_t stepsPerEpoch() const { return steps_; }
  // This rank's shard for the current epoch, in visiting order.
  const std::vector<int64_t>& shard() const { return shard_; }
  // Indices of step `step` (in [0, stepsPerEpoch())) of the current epoch.
  std::vector<int64_t> batch(int64_t step) const;

  bool hasNext() const { return state_.position < steps_; }
  // The next step's indices; advances the position. Requires hasNext().
  std::vector<int64_t> next();

  SamplerState state() const { return state_; }
  // Continues from a saved state (same options): rebuilds that epoch's shard.
  void restore(const SamplerState& state);
  const SamplerOptions& options() const { return options_; }

 private:
  SamplerOptions options_;
  SamplerState state_;
  int64_t samplesPerRank_ = 0;
  int64_t steps_ = 0;
  std::vector<int64_t> shard_;
};

}  // namespace gradzip::data
