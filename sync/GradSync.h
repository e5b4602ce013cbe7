// GradSync: the data-parallel gradient synchronisation the optimizer loop talks
// to. Gradients are packed into buckets in reverse parameter-registration order
// (the order backward produces them); a gradient hook copies each gradient into
// its bucket as soon as autograd produces it, and a full bucket is handed to a
// communication thread, so compression and communication overlap the rest of the
// backward pass. Buckets are always communicated in index order on every rank
// (collectives must match across ranks). Each bucket runs its own Plan
// (compressor + collective); plans can be switched between steps.
//
// Per step it reports a breakdown: encode, communicate, decode (on the comm
// thread), exposed communication (time the training thread waits after
// backward), and payload bytes on the wire.
#pragma once

#include "comm/Collective.h"
#include "comm/Communicator.h"
#include "compress/Compressor.h"
#include "sync/BucketSync.h"
#include "sync/CommStream.h"
#include "sync/CompressionStats.h"
#include "sync/NonFiniteGradient.h"
#include "sync/Plan.h"
#include "sync/SyncBreakdown.h"
#include "sync/SyncedBuckets.h"

#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <optional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace gradzip::trainer {

struct GradSyncOptions {
  int64_t bucketBytes = 25 << 20;  // like DDP's default 25 MiB
  uint64_t seed = 0;
  bool overlap = true;  // false: communicate everything after backward (for ablations)
  bool checkFinite = true;  // agree across ranks on NaN/Inf before compressing each bucket
};

// The bucket cap for a run whose plan is `plan` (static when !controlled):
// a static plan whose compressor runs on the fused whole-model gradient
// (compress::Capabilities::wholeModel: AR-TopK, flexible-communication Alg. 1,
// unless `fused: false`) gets one bucket for the whole model; every other
// plan, and every run under the controller (whose buckets its candidates
// share), keeps `bucketBytes`.
int64_t bucketBytesFor(const Plan& plan, int64_t bucketBytes, bool controlled);

// The training loop's gradient synchronisation, and the controller's view of
// it (sync/SyncedBuckets.h). Final: its own calls to the view's accessors
// need no virtual dispatch.
class GradSync final : public SyncedBuckets {
 public:
  // params: named parameters in registration order (all require grad).
  GradSync(std::vector<std::pair<std::string, torch::Tensor>> params, comm::Communicator& comm,
           GradSyncOptions opts, const Plan& plan);
  ~GradSync() override;
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Call before backward of each step (arms the hooks for `step`).
  void beginStep(int64_t step);
  // Call after backward: hands over buckets whose gradients never arrived
  // (unused parameters count as zero on every rank), waits for all buckets, and
  // writes the averaged gradients into each parameter's .grad.
  SyncBreakdown finishStep();

  // Switch every bucket (or one) to `plan` from the next step on. Compressor
  // state (PowerSGD's Q, THC's tables, ...) is kept per (bucket, plan), so
  // switching back resumes it. The error-feedback residual follows the bucket
  // instead: at the first step under a new plan, the previous plan's residual
  // moves to the new plan's (both with error feedback) or joins that step's
  // gradient (the new plan keeps none). Σ applied + residual = Σ gradients
  // then holds across switches, as compress/ErrorFeedback.h promises for one
  // compressor; parking the residual with the old plan would drop it.
  void setPlan(const Plan& plan) override;
  void setPlan(int bucket, const Plan& plan) override;
  const Plan& plan(int bucket) const override { return buckets_.at(bucket).sync->plan(); }
  // ||e||₂ over every bucket's error-feedback residual under its current plan
  // (0 when no current plan uses error feedback, or before the first step).
  double residualNorm() const;
  int numBuckets() const override { return static_cast<int>(buckets_.size()); }
  // Whether a bucket's sync can run while backward does (overlap on, more than
  // one bucket); otherwise every sync starts after backward and leaves
  // forward+backward as it would be under any plan.
  bool overlapsBackward() const override { return opts_.overlap && buckets_.size() > 1; }
  int64_t bucketNumel(int bucket) const override { return buckets_.at(bucket).numel; }
  // Between steps: the bucket's averaged gradient of the last step (float32, flat).
  const torch::Tensor& bucketGradient(int bucket) const override { return buckets_.at(bucket).flat; }
  const std::vector<compress::TensorSlot>& bucketLayout(int bucket) const override {
    return buckets_.at(bucket).sync->layout();
  }
  // Bucket k's share of the last finishStep().
  const SyncBreakdown& lastBreakdown(int bucket) const override { return buckets_.at(bucket).last; }
  // Seconds from the last beginStep() to its finishStep(): backward's end on
  // the clock of the buckets' handover times.
  double lastBackwardEnd() const override { return backwardEnd_; }

  // With measuring on, every bucket's CompressionStats of the last step (costs
  // three reductions over each bucket per step), in the gradient's geometry
  // (the TTA rows' vNMSE, the same for every plan and optimizer), and in the
  // geometry of setStatScale (the controller's; the same numbers without one).
  void setMeasureCompression(bool on) override { measure_ = on; }
  const CompressionStats& lastStats(int bucket) const { return buckets_.at(bucket).sync->lastStats(); }
  const CompressionStats& lastWeightedStats(int bucket) const override {
    return buckets_.at(bucket).sync->lastWeightedStats();
  }
  // The weighted geometry from the next step on: scaleOf(param) is a
  // tensor's update factor s, or none for 1. A bucket none of whose tensors
  // has one measures in the gradient's geometry. Between steps only.
  void setStatScale(const std::function<std::optional<double>(const torch::Tensor& param)>& scaleOf) override;
  // Bucket k's s² per slot of its layout (measureCompression's weights), or
  // empty.
  const std::vector<double>& statWeights(int bucket) const override { return buckets_.at(bucket).sync->weights(); }
  // With measuring on: this rank's own gradient of bucket k in the last step,
  // before compression and error feedback (undefined before the first step).
  const torch::Tensor& lastInput(int bucket) const override { return buckets_.at(bucket).sync->lastInput(); }

  // The (bucket, plan) compressor states that exist, and dropping every other
  // one: an in-memory snapshot records the keys next to save()'s archive, and
  // restoring does keepOnly(keys) then load(), so plans tried in between leave
  // no trace (the trainer's ControlledLoop::snapshot/restore, which the
  // controller's exploration and provisional rewind use).
  std::vector<std::vector<std::string>> compressorKeys() const;
  void keepOnly(const std::vector<std::vector<std::string>>& keys);

  // Compressor state of every (bucket, plan) for checkpoints.
  void save(torch::serialize::OutputArchive& ar) const;
  void load(torch::serialize::InputArchive& ar);

 private:
  struct Bucket {
    Bucket() = default;
    Bucket(Bucket&&) = default;  // move-only: it owns compressors
    Bucket(const Bucket&) = delete;
    std::vector<int> params;  // indices into params_
    int64_t numel = 0;
    torch::Tensor flat;  // float32 gradient buffer
    int pending = 0;     // gradients still missing this step
    bool ready = false;  // handed to the comm thread
    bool done = false;
    std::unique_ptr<BucketSync> sync;  // its plan, compressor state and measuring
    SyncBreakdown last;
    // CUDA buckets: the comm stream waits for the gradients' copies (toComm),
    // the copies back into the gradients wait for the comm stream (fromComm).
    CommStream::Handover toComm, fromComm;
  };

  void onGrad(int param, const torch::Tensor& grad);
  void markReady(int bucket);
  void commLoop();
  void syncBucket(Bucket& b);

  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<int> bucketOf_;
  std::vector<int64_t> offsetOf_;
  std::vector<char> arrived_;
  std::vector<unsigned> hooks_;
  comm::Communicator& comm_;
  GradSyncOptions opts_;
  c10::Device device_;      // the parameters', hence every bucket's
  CommStream commStream_;   // the comm thread's stream (CUDA buckets)
  std::vector<Bucket> buckets_;
  int64_t step_ = 0;
  std::chrono::steady_clock::time_point stepStart_;  // beginStep, for the buckets' handover times
  double backwardEnd_ = 0;                           // finishStep's entry after stepStart_
  bool inStep_ = false;
  bool measure_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  int nextToSync_ = 0;  // comm thread progress (bucket index)
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace gradzip::trainer
