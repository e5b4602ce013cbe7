// Out-of-line helpers of compress/Compressor.h: seeds, argument checks, the
// plan's all-reduce and phase timing.
#include "compress/Compressor.h"

#include "comm/Reduction.h"
#include "compress/DevicePhaseClock.h"
#include "compress/kernels/CounterRng.h"
#include "compress/kernels/SimdKernels.h"
#include "util/Error.h"

#include <fmt/ranges.h>

#include <cmath>

namespace gradzip::compress {
namespace {
// One splitmix64 step (CounterRng.h): a cheap, well-mixed hash for deriving seeds.
uint64_t mix(uint64_t x) {
  return mix64(x + kSplitmixGamma);
}
}  // namespace

uint64_t Context::sharedSeed() const {
  return mix(mix(mix(seed) ^ static_cast<uint64_t>(bucket)) ^ static_cast<uint64_t>(step));
}

uint64_t Context::privateSeed() const { return mix(sharedSeed() ^ (0x5bd1e995ULL * (comm.rank() + 1))); }

int64_t Payload::bytes() const {
  int64_t b = 0;
  for (const auto& t : tensors) b += static_cast<int64_t>(t.numel()) * t.element_size();
  return b;
}

void checkGradientLayout(const at::Tensor& x, const std::string& who) {
  GZ_CHECK(x.defined(), "{}: undefined gradient tensor", who);
  GZ_CHECK(x.dim() == 1, "{}: expected a 1-D (flattened) gradient, got {} dimensions", who, x.dim());
  GZ_CHECK(x.scalar_type() == at::kFloat, "{}: expected float32 gradients, got {}", who,
           c10::toString(x.scalar_type()));
  GZ_CHECK(x.is_contiguous(), "{}: gradient must be contiguous", who);
}

void requireFinite(bool finite, const std::string& who) {
  GZ_CHECK(finite, "{}: gradient contains NaN or Inf; refusing to compress (see trainer.nan_policy)", who);
}

void checkGradient(const at::Tensor& x, const std::string& who) {
  checkGradientLayout(x, who);
  bool finite = true;
  if (x.numel() > 0 && x.is_cpu()) {
    finite = simd::allFinite(x.data_ptr<float>(), x.numel());  // one pass, no temporary
  } else if (x.numel() > 0) {
    // min and max propagate NaN, and are infinite exactly when some element is.
    const auto [lo, hi] = at::aminmax(x);
    finite = std::isfinite(lo.item<float>()) && std::isfinite(hi.item<float>());
  }
  requireFinite(finite, who);
}

void checkSameNumelAcrossRanks(int64_t d, Context& ctx, const std::string& who) {
  const int n = ctx.comm.size();
  if (n == 1) return;
  std::vector<at::Tensor> all(n);
  for (auto& t : all) t = at::empty({1}, at::kLong);
  ctx.comm.allGather(all, at::full({1}, d, at::kLong)).wait();
  std::vector<int64_t> sizes;
  bool same = true;
  for (const auto& t : all) {
    sizes.push_back(t.item<int64_t>());
    same = same && sizes.back() == d;
  }
  GZ_CHECK(same, "{}: ranks hold buckets of different sizes (coordinates by rank: {}); every rank must "
           "aggregate the same bucket", who, fmt::join(sizes, ", "));
}

void confirmNumelOnce(int64_t* agreed, int64_t d, Context& ctx, const std::string& who) {
  if (*agreed == d) return;
  checkSameNumelAcrossRanks(d, ctx, who);
  *agreed = d;
}

at::Tensor allReduceSum(const at::Tensor& t, Context& ctx) {
  GZ_ASSERT(t.dim() == 1 && t.is_contiguous(), "allReduceSum expects a 1-D contiguous tensor");
  ScopedPhase phase(ctx.times, &PhaseTimes::communicate);
  if (ctx.times) ctx.times->bytesSent += static_cast<int64_t>(t.numel()) * t.element_size();
  if (ctx.collective) return ctx.collective->allReduce(t, *comm::floatSum());
  at::Tensor out = t.clone();
  ctx.comm.allReduce(out, comm::ReduceOp::Sum).wait();
  return out;
}

ScopedPhase::ScopedPhase(PhaseTimes* times, double PhaseTimes::*field)
    : times_(times), field_(field), start_(std::chrono::steady_clock::now()) {
  if (times_ && times_->deviceClock) times_->deviceClock->begin(field_);
}

ScopedPhase::~ScopedPhase() {
  if (!times_) return;
  if (times_->deviceClock)
    times_->deviceClock->end();
  else
    times_->*field_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

const at::Tensor& Compressor::residual() const {
  static const at::Tensor none;
  return none;
}

}  // namespace gradzip::compress
