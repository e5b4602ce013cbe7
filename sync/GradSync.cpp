// Implements the bucketing side of sync/GradSync.h: bucket assignment,
// gradient hooks, handing full buckets to the in-order communication thread,
// and the per-step breakdown. Running a bucket's plan (compressor, collective,
// residual hand-over, measuring) and the plans' state are GradSyncPlans.cpp.
#include "sync/GradSync.h"

#include "compress/Factory.h"
#include "util/Error.h"
#include "util/Yaml.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>

namespace gradzip::trainer {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

int64_t bucketBytesFor(const Plan& plan, int64_t bucketBytes, bool controlled) {
  if (controlled || !plan.makeCompressor()->capabilities().wholeModel) return bucketBytes;
  spdlog::info("GradSync: {} runs on the fused whole-model gradient (one bucket; comm.bucket_mb not used)", plan.key());
  return std::numeric_limits<int64_t>::max();
}

GradSync::GradSync(std::vector<std::pair<std::string, torch::Tensor>> params, comm::Communicator& comm,
                   GradSyncOptions opts, const Plan& plan)
    : params_(std::move(params)),
      comm_(comm),
      opts_(opts),
      device_(params_.empty() ? c10::Device(c10::kCPU) : params_.front().second.device()),
      commStream_(device_) {
  GZ_CHECK(!params_.empty(), "GradSync: the model has no trainable parameters");
  GZ_CHECK(opts_.bucketBytes > 0, "GradSync: bucket size must be positive");
  const int n = static_cast<int>(params_.size());
  bucketOf_.assign(n, -1);
  offsetOf_.assign(n, 0);
  arrived_.assign(n, 0);
  // Reverse registration order approximates the order in which backward
  // produces gradients, so early buckets fill (and ship) first.
  std::vector<std::vector<compress::TensorSlot>> layouts;
  for (int i = n - 1; i >= 0; --i) {
    const auto& p = params_[i].second;
    GZ_CHECK(p.scalar_type() == at::kFloat, "GradSync: parameter {} is {}, only float32 is supported",
             params_[i].first, c10::toString(p.scalar_type()));
    GZ_CHECK(p.device() == params_.front().second.device(), "GradSync: parameter {} is on {} but {} is on {}",
             params_[i].first, p.device().str(), params_.front().first, params_.front().second.device().str());
    const int64_t bytes = p.numel() * 4;
    if (buckets_.empty() || (buckets_.back().numel * 4 + bytes > opts_.bucketBytes && buckets_.back().numel > 0)) {
      buckets_.emplace_back();
      layouts.emplace_back();
    }
    auto& b = buckets_.back();
    bucketOf_[i] = static_cast<int>(buckets_.size()) - 1;
    offsetOf_[i] = b.numel;
    b.params.push_back(i);
    layouts.back().push_back({params_[i].first, p.sizes().vec(), b.numel, p.numel()});
    b.numel += p.numel();
  }
  for (size_t k = 0; k < buckets_.size(); ++k) {
    // On the parameters' device (run.device): the bucket, and all compressor state derived from it, lives there.
    buckets_[k].flat = torch::zeros({buckets_[k].numel}, params_[buckets_[k].params.front()].second.options().dtype(torch::kFloat));
    buckets_[k].sync = std::make_unique<BucketSync>(static_cast<int>(k), std::move(layouts[k]), plan);
    buckets_[k].toComm = CommStream::Handover(device_);
    buckets_[k].fromComm = CommStream::Handover(device_);
  }
  for (int i = 0; i < n; ++i) {
    auto& p = params_[i].second;
    hooks_.push_back(p.register_hook([this, i](const torch::Tensor& g) { onGrad(i, g); }));
  }
  spdlog::info("GradSync: {} parameters in {} buckets (cap {:.1f} MiB), plan {}", n, buckets_.size(),
               opts_.bucketBytes / 1048576.0, plan.key());
  worker_ = std::thread([this] { commLoop(); });
}

GradSync::~GradSync() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  for (size_t i = 0; i < params_.size(); ++i) params_[i].second.remove_hook(hooks_[i]);
}

void GradSync::beginStep(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  GZ_ASSERT(!inStep_, "beginStep called twice without finishStep");
  step_ = step;
  stepStart_ = Clock::now();
  inStep_ = true;
  std::fill(arrived_.begin(), arrived_.end(), 0);
  for (auto& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.ready = b.done = false;
    b.last = {};
  }
  nextToSync_ = 0;
  error_ = nullptr;
}

void GradSync::onGrad(int param, const torch::Tensor& grad) {
  if (!inStep_) return;  // backward outside a training step (e.g. a probe): not ours
  const int k = bucketOf_[param];
  auto& b = buckets_[k];
  b.flat.narrow(0, offsetOf_[param], grad.numel()).copy_(grad.reshape(-1));
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    GZ_ASSERT(!arrived_[param], "gradient of {} arrived twice in one step", params_[param].first);
    arrived_[param] = 1;
    full = --b.pending == 0;
  }
  if (full && opts_.overlap) markReady(k);
}

void GradSync::markReady(int bucket) {
  buckets_[bucket].toComm.produced(device_);  // after this thread's copies into the bucket
  {
    std::lock_guard<std::mutex> lock(mu_);
    buckets_[bucket].ready = true;
    buckets_[bucket].last.handover = since(stepStart_);
  }
  cv_.notify_all();
}

SyncBreakdown GradSync::finishStep() {
  GZ_ASSERT(inStep_, "finishStep without beginStep");
  const auto t0 = Clock::now();
  backwardEnd_ = std::chrono::duration<double>(t0 - stepStart_).count();
  for (int k = 0; k < numBuckets(); ++k) {
    auto& b = buckets_[k];
    bool ready;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready = b.ready;
    }
    if (ready) continue;
    // Parameters that took no part in this step's graph contribute zeros; every
    // rank does the same, so the collectives still match.
    for (int i : b.params)
      if (!arrived_[i]) b.flat.narrow(0, offsetOf_[i], params_[i].second.numel()).zero_();
    markReady(k);
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return nextToSync_ == numBuckets(); });
    inStep_ = false;
    if (error_) std::rethrow_exception(error_);
  }
  SyncBreakdown total;
  total.exposed = since(t0);
  for (auto& b : buckets_) {
    b.fromComm.await(device_);  // this thread's copies below wait for the comm stream's result
    for (int i : b.params) {
      auto& p = params_[i].second;
      auto mean = b.flat.narrow(0, offsetOf_[i], p.numel()).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(mean);
      else
        p.mutable_grad() = mean.clone();
    }
    total.encode += b.last.encode;
    total.communicate += b.last.communicate;
    total.decode += b.last.decode;
    total.bytesSent += b.last.bytesSent;
    total.saturated += b.last.saturated;
  }
  return total;
}

void GradSync::commLoop() {
  const CommStream::Use onCommStream(commStream_);  // CUDA: compression and collectives overlap backward
  for (;;) {
    int k;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || (nextToSync_ < numBuckets() && buckets_[nextToSync_].ready); });
      if (stop_) return;
      k = nextToSync_;
    }
    try {
      std::exception_ptr prior;
      {
        std::lock_guard<std::mutex> lock(mu_);
        prior = error_;
      }
      // After a failure the remaining buckets are skipped; peers time out on
      // their collectives and report the failure themselves.
      const auto start = Clock::now();
      if (!prior) {
        buckets_[k].toComm.await(device_);
        syncBucket(buckets_[k]);
        buckets_[k].fromComm.produced(device_);
      }
      buckets_[k].last.busy = since(start);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      buckets_[k].done = true;
      ++nextToSync_;
    }
    cv_.notify_all();
  }
}

}  // namespace gradzip::trainer
