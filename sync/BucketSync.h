// BucketSync: one bucket's gradient averaged across ranks under its Plan. It
// owns the bucket's compressor state per plan (PowerSGD's Q, THC's tables,
// error-feedback residuals) and the plan's collective, hands the residual over
// when the plan changes, and optionally measures what compression did. GradSync
// runs one per bucket of the C++ trainer, and the PyTorch DDP hook (python/)
// one per DDP bucket, so both run a plan the same way.
#pragma once

#include "comm/Collective.h"
#include "comm/Communicator.h"
#include "compress/Compressor.h"
#include "sync/CompressionStats.h"
#include "sync/Plan.h"
#include "sync/SyncBreakdown.h"

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gradzip::trainer {

// What one run() took: the compressor's phases (encode, communicate, decode,
// payload bytes), the wall seconds of aggregate(), and the clip events of a
// saturating aggregation summed over ranks.
struct BucketRun {
  compress::PhaseTimes times;
  double seconds = 0;
  int64_t saturated = 0;
  // As the bucket's SyncBreakdown (encode, communicate, decode, bytes,
  // saturation; handover and busy are the caller's to fill). A compressor that
  // does not split its time has it all counted as communication.
  SyncBreakdown breakdown() const;
};

class BucketSync {
 public:
  // index: the bucket's position (seeds and tags derive from it; the same on
  // every rank). layout: its tensors inside the flat gradient (names for error
  // messages, shapes for shape-aware schemes); empty means one flat vector.
  BucketSync(int index, std::vector<compress::TensorSlot> layout, const Plan& plan);
  BucketSync(BucketSync&&) = default;
  BucketSync(const BucketSync&) = delete;

  int index() const { return index_; }
  const std::vector<compress::TensorSlot>& layout() const { return layout_; }
  const Plan& plan() const { return plan_; }
  const std::string& key() const { return key_; }
  // From the next run() on. The compressor state of every plan is kept, so
  // switching back resumes it; the error-feedback residual follows the bucket
  // (run() moves it from the last plan's compressor to the new one's, or adds
  // it to that step's gradient when the new plan keeps none), so
  // Σ applied + residual = Σ gradients holds across switches
  // (compress/ErrorFeedback.h).
  void setPlan(const Plan& plan);

  // Collective (every rank, same bucket, same step): replaces `flat` (1-D,
  // float32, contiguous) with the mean over ranks under the current plan.
  // With `measure`, lastStats()/lastWeightedStats()/lastInput() describe it.
  BucketRun run(at::Tensor& flat, comm::Communicator& comm, uint64_t seed, int64_t step, bool measure);

  // Collective: whether `flat` is finite on every rank (one 1-element MAX
  // all-reduce), so that all ranks apply a NaN policy at the same bucket.
  static bool finiteOnEveryRank(const at::Tensor& flat, comm::Communicator& comm);
  // The layout's tensors holding a NaN or Inf in `flat`.
  std::vector<std::string> nonFiniteTensors(const at::Tensor& flat) const;

  // Measuring (run with measure): CompressionStats of the last run in the
  // gradient's geometry and in setWeights'; this rank's gradient before
  // compression and error feedback.
  const CompressionStats& lastStats() const { return stats_; }
  const CompressionStats& lastWeightedStats() const { return weighted_; }
  const torch::Tensor& lastInput() const { return input_; }
  // s² per layout slot for the weighted geometry; empty = ones.
  void setWeights(std::vector<double> weights) { weights_ = std::move(weights); }
  const std::vector<double>& weights() const { return weights_; }
  // ||e||₂ of the current plan's residual (0 without error feedback).
  double residualNorm() const;
  // The current plan's residual, taken (undefined without one), and adding
  // one to it (false when the plan keeps none): for moving a residual between
  // buckets that hold the same tensors in another order.
  at::Tensor takeResidual() { return compressor().takeResidual(); }
  bool addResidual(const at::Tensor& e) { return compressor().addResidual(e); }

  // The plans whose state exists, and dropping every other one (an in-memory
  // snapshot keeps the keys; restoring drops the plans tried since).
  std::vector<std::string> compressorKeys() const;
  void keepOnly(const std::vector<std::string>& keys);

  // Every plan's compressor state and the plan of the last run, under
  // "bucket<index>/...". load() builds the current plan's compressor first so
  // its state is restored even before its first run.
  void save(torch::serialize::OutputArchive& ar) const;
  void load(torch::serialize::InputArchive& ar);

 private:
  compress::Compressor& compressor();
  comm::Collective* collective(comm::Communicator& comm);

  int index_;
  std::vector<compress::TensorSlot> layout_;
  Plan plan_;
  std::string key_;      // plan_.key(), kept with the plan (a YAML emit: not once per step)
  std::string lastKey_;  // the plan of the last run (checkpointed)
  std::map<std::string, std::unique_ptr<compress::Compressor>> compressors_;  // by plan key
  std::map<std::string, std::unique_ptr<comm::Collective>> collectives_;     // by name
  CompressionStats stats_, weighted_;
  torch::Tensor input_;    // measuring: the local gradient before aggregation
  torch::Tensor scratch_;  // measuring: gradient + residual, then the compression error
  std::vector<double> weights_;
};

}  // namespace gradzip::trainer
