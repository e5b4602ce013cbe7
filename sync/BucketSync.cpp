// Implements sync/BucketSync.h: building a plan's compressor and collective on
// first use, the residual hand-over between plans, the timed aggregate and the
// optional measuring of what compression did.
#include "sync/BucketSync.h"

#include "compress/DevicePhaseClock.h"
#include "util/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <optional>

namespace gradzip::trainer {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

SyncBreakdown BucketRun::breakdown() const {
  SyncBreakdown b;
  b.encode = times.encode;
  b.decode = times.decode;
  b.communicate = times.communicate > 0 ? times.communicate : std::max(0.0, seconds - times.encode - times.decode);
  b.bytesSent = times.bytesSent;
  b.saturated = saturated;
  return b;
}

BucketSync::BucketSync(int index, std::vector<compress::TensorSlot> layout, const Plan& plan)
    : index_(index), layout_(std::move(layout)) {
  setPlan(plan);
}

void BucketSync::setPlan(const Plan& plan) {
  plan_ = plan;
  key_ = plan.key();
}

compress::Compressor& BucketSync::compressor() {
  auto it = compressors_.find(key_);
  if (it != compressors_.end()) return *it->second;
  auto c = plan_.makeCompressor();
  const auto caps = c->capabilities();
  GZ_CHECK(std::find(caps.collectives.begin(), caps.collectives.end(), plan_.collective) != caps.collectives.end(),
           "plan {}: compressor {} does not support collective '{}' (supported: {})", key_, plan_.compressor,
           plan_.collective, fmt::join(caps.collectives, ", "));
  return *(compressors_[key_] = std::move(c));
}

comm::Collective* BucketSync::collective(comm::Communicator& comm) {
  const std::string& name = plan_.collective;
  // The engine's all-reduce and all-gather are the communicator's own operations.
  if (name == "engine" || name == "allgather") return nullptr;
  auto& slot = collectives_[name];
  if (!slot) slot = comm::makeCollective(name, comm);
  return slot.get();
}

bool BucketSync::finiteOnEveryRank(const at::Tensor& flat, comm::Communicator& comm) {
  const bool finite = at::isfinite(flat).all().item<bool>();
  auto flag = torch::full({1}, finite ? 0.0f : 1.0f);
  comm.allReduce(flag, comm::ReduceOp::Max).wait();
  return flag.item<float>() == 0;
}

std::vector<std::string> BucketSync::nonFiniteTensors(const at::Tensor& flat) const {
  std::vector<std::string> bad;
  if (layout_.empty()) {
    if (!at::isfinite(flat).all().item<bool>()) bad.push_back(fmt::format("bucket {}", index_));
    return bad;
  }
  for (const auto& s : layout_)
    if (!at::isfinite(flat.narrow(0, s.offset, s.numel)).all().item<bool>()) bad.push_back(s.name);
  return bad;
}

BucketRun BucketSync::run(at::Tensor& flat, comm::Communicator& comm, uint64_t seed, int64_t step, bool measure) {
  auto& c = compressor();
  comm::Collective* coll = collective(comm);
  if (!lastKey_.empty() && lastKey_ != key_) {
    const auto it = compressors_.find(lastKey_);
    const at::Tensor e = it == compressors_.end() ? at::Tensor() : it->second->takeResidual();
    if (e.defined() && !c.addResidual(e)) flat.add_(e);
  }
  lastKey_ = key_;
  BucketRun out;
  compress::Context ctx{comm, coll, plan_.collective, layout_, seed, index_, step, &out.times};
  // The error-fed input, before aggregate() moves the residual on. The buffers
  // are kept: measuring runs every step under the controller.
  torch::Tensor input;
  if (measure) {
    if (!input_.defined() || input_.numel() != flat.numel()) {
      input_ = torch::empty_like(flat);
      scratch_ = torch::empty_like(flat);
    }
    input_.copy_(flat);
    input = c.residual().defined() ? at::add_out(scratch_, flat, c.residual()) : input_;
  }
  const auto t0 = Clock::now();
  // CUDA: the phases are timed on the device (compress/DevicePhaseClock.h).
  std::optional<compress::DevicePhaseClock> deviceClock;
  if (flat.is_cuda()) {
    deviceClock.emplace(flat.device());
    out.times.deviceClock = &*deviceClock;
  }
  auto agg = c.aggregate(flat, ctx);
  if (deviceClock) {
    deviceClock->addTo(out.times);
    out.times.deviceClock = nullptr;
  }
  out.seconds = since(t0);
  out.saturated = agg.saturated;
  stats_ = weighted_ = {};
  if (measure && agg.localApplied.defined()) {
    const auto m = measureCompression(input, agg.localApplied.to(torch::kFloat).reshape(-1), layout_, weights_,
                                      scratch_);
    stats_ = m.plain;
    weighted_ = m.weighted;
  }
  flat.copy_(agg.mean);
  return out;
}

double BucketSync::residualNorm() const {
  const auto it = compressors_.find(key_);
  return it == compressors_.end() ? 0.0 : it->second->residualNorm();
}

std::vector<std::string> BucketSync::compressorKeys() const {
  std::vector<std::string> keys;
  for (const auto& kv : compressors_) keys.push_back(kv.first);
  return keys;
}

void BucketSync::keepOnly(const std::vector<std::string>& keys) {
  for (auto it = compressors_.begin(); it != compressors_.end();)
    it = std::find(keys.begin(), keys.end(), it->first) == keys.end() ? compressors_.erase(it) : std::next(it);
}

void BucketSync::save(torch::serialize::OutputArchive& ar) const {
  for (const auto& [key, c] : compressors_) {
    torch::serialize::OutputArchive sub;
    c->save(sub);
    ar.write(fmt::format("bucket{}/{}", index_, key), sub);
  }
  ar.write(fmt::format("bucket{}/last_plan", index_), c10::IValue(lastKey_));
}

void BucketSync::load(torch::serialize::InputArchive& ar) {
  compressor();
  for (auto& [key, c] : compressors_) {
    torch::serialize::InputArchive sub;
    if (ar.try_read(fmt::format("bucket{}/{}", index_, key), sub)) c->load(sub);
  }
  // Checkpoints from before the hand-over have none: no hand-over at the first run.
  c10::IValue last;
  lastKey_ = ar.try_read(fmt::format("bucket{}/last_plan", index_), last) && last.isString() ? last.toStringRef() : "";
}

}  // namespace gradzip::trainer
