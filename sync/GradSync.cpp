// Implements sync/GradSync.h: bucket assignment, gradient hooks, the
// in-order communication thread, and the per-step breakdown.
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
    : params_(std::move(params)), comm_(comm), opts_(opts) {
  GZ_CHECK(!params_.empty(), "GradSync: the model has no trainable parameters");
  GZ_CHECK(opts_.bucketBytes > 0, "GradSync: bucket size must be positive");
  const int n = static_cast<int>(params_.size());
  bucketOf_.assign(n, -1);
  offsetOf_.assign(n, 0);
  arrived_.assign(n, 0);
  // Reverse registration order approximates the order in which backward
  // produces gradients, so early buckets fill (and ship) first.
  for (int i = n - 1; i >= 0; --i) {
    const auto& p = params_[i].second;
    GZ_CHECK(p.scalar_type() == at::kFloat, "GradSync: parameter {} is {}, only float32 is supported",
             params_[i].first, c10::toString(p.scalar_type()));
    const int64_t bytes = p.numel() * 4;
    if (buckets_.empty() || (buckets_.back().numel * 4 + bytes > opts_.bucketBytes && buckets_.back().numel > 0))
      buckets_.emplace_back();
    auto& b = buckets_.back();
    bucketOf_[i] = static_cast<int>(buckets_.size()) - 1;
    offsetOf_[i] = b.numel;
    b.params.push_back(i);
    b.layout.push_back({params_[i].first, p.sizes().vec(), b.numel, p.numel()});
    b.numel += p.numel();
  }
  for (auto& b : buckets_) {
    b.flat = torch::zeros({b.numel}, torch::kFloat);
    b.plan = plan;
    b.key = plan.key();
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
      if (!prior) syncBucket(buckets_[k]);
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

MeasuredCompression measureCompression(const torch::Tensor& input, const torch::Tensor& applied,
                                       const std::vector<compress::TensorSlot>& layout,
                                       const std::vector<double>& weights, torch::Tensor scratch) {
  GZ_ASSERT(weights.empty() || weights.size() == layout.size(), "{} weights for {} slots", weights.size(),
            layout.size());
  MeasuredCompression m;
  // Σ over the slots (over the whole bucket without weights) of dot(u, v),
  // into plain and, times the slot's weight, weighted.
  auto add = [&](const torch::Tensor& u, const torch::Tensor& v, double CompressionStats::*field) {
    if (weights.empty()) {
      m.plain.*field = at::dot(u, v).item<double>();
      return;
    }
    for (size_t j = 0; j < layout.size(); ++j) {
      const double d = at::dot(u.narrow(0, layout[j].offset, layout[j].numel),
                               v.narrow(0, layout[j].offset, layout[j].numel)).item<double>();
      m.plain.*field += d;
      m.weighted.*field += weights[j] * d;
    }
  };
  add(input, input, &CompressionStats::inputSq);
  add(applied, applied, &CompressionStats::appliedSq);
  const auto diff = scratch.defined() ? at::sub_out(scratch, input, applied)  // may overwrite input (then unused)
                                      : input - applied;
  add(diff, diff, &CompressionStats::errorSq);
  if (weights.empty()) m.weighted = m.plain;
  return m;
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
