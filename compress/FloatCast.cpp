// Implements compress/FloatCast.h: fp32 / fp16 / bf16 all-reduce baselines.
#include "compress/FloatCast.h"

#include "compress/FloatWire.h"
#include "compress/kernels/SimdKernels.h"
#include "util/Error.h"

#include <cstring>

namespace gradzip::compress {

FloatCast::FloatCast(at::ScalarType wire) : wire_(wire) {
  GZ_CHECK(wire == at::kFloat || wire == at::kHalf || wire == at::kBFloat16,
           "FloatCast: wire type must be float, half or bfloat16, got {}", c10::toString(wire));
}

std::string FloatCast::name() const {
  switch (wire_) {
    case at::kHalf: return "fp16";
    case at::kBFloat16: return "bf16";
    default: return "fp32";
  }
}

Capabilities FloatCast::capabilities() const {
  Capabilities c;
  c.summable = true;
  // fp32 is exact; rounding to a half type is deterministic round-to-nearest,
  // which is biased for an individual x.
  c.unbiased = wire_ == at::kFloat;
  c.collectives = {"engine", "ring", "tree", "ps"};
  return c;
}

double FloatCast::bitsPerCoordinate(int64_t, int) const { return 8.0 * c10::elementSize(wire_); }

// One fused pass: the wire cast (dividing by `div` first) and the finiteness
// check of x; throws before the wire leaves when x holds NaN or Inf.
at::Tensor FloatCast::castChecked(const at::Tensor& x, float div, at::Tensor& cache) const {
  at::Tensor wire = simd::reusableBuffer(cache, x.numel(), wire_);
  const float* in = x.data_ptr<float>();
  bool finite;
  switch (wire_) {
    case at::kHalf: finite = simd::floatToHalf(in, div, wire.data_ptr<c10::Half>(), x.numel()); break;
    case at::kBFloat16: finite = simd::floatToBf16(in, div, wire.data_ptr<c10::BFloat16>(), x.numel()); break;
    default: finite = simd::copyFinite(in, wire.data_ptr<float>(), x.numel()); break;
  }
  requireFinite(finite, name());
  return wire;
}

at::Tensor FloatCast::widen(const at::Tensor& wire, float mul, at::Tensor& cache) const {
  at::Tensor out = simd::reusableBuffer(cache, wire.numel(), at::kFloat);
  const int64_t n = wire.numel();
  switch (wire_) {
    case at::kHalf: simd::halfToFloat(wire.data_ptr<c10::Half>(), mul, out.data_ptr<float>(), n); break;
    case at::kBFloat16: simd::bf16ToFloat(wire.data_ptr<c10::BFloat16>(), mul, out.data_ptr<float>(), n); break;
    default: std::memcpy(out.data_ptr<float>(), wire.data_ptr<float>(), n * sizeof(float)); break;
  }
  return out;
}

Aggregated FloatCast::aggregate(const at::Tensor& x, Context& ctx) {
  if (!fastPath(x)) return aggregateGeneric(x, ctx);
  checkGradientLayout(x, name());
  checkNonEmpty(x, name());
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, name());  // Gloo aborts on mismatched sizes
  const int n = ctx.comm.size();
  Aggregated out;
  if (wire_ == at::kFloat) {
    requireFinite(simd::allFinite(x.data_ptr<float>(), x.numel()), name());
    // Sum first, then divide: the exact counterpart of a plain all-reduce.
    out.mean = allReduceSum(x, ctx).div_(n);
    out.localApplied = x;
    return out;
  }
  at::Tensor wire;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    // Apply the division first to avoid overflow of the half-precision sum.
    wire = castChecked(x, static_cast<float>(n), wireCache_);
  }
  at::Tensor sum = allReduceSum(wire, ctx);
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  out.mean = widen(sum.contiguous(), 1.0f, meanCache_);
  out.localApplied = widen(wire, static_cast<float>(n), appliedCache_);
  return out;
}

// The same computation with ATen ops: the device-generic path
// (compress/CodecPath.h), for CUDA tensors and for `codec: generic`.
Aggregated FloatCast::aggregateGeneric(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  checkNonEmpty(x, name());
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, name());  // Gloo aborts on mismatched sizes
  const int n = ctx.comm.size();
  Aggregated out;
  if (wire_ == at::kFloat) {
    out.mean = allReduceSum(x, ctx).div_(n);
    out.localApplied = x;
    return out;
  }
  at::Tensor wire;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    wire = n == 1 ? x.to(wire_) : x.div(n).to(wire_);
  }
  at::Tensor sum = allReduceSum(wire, ctx);
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  out.mean = sum.to(at::kFloat);
  out.localApplied = n == 1 ? wire.to(at::kFloat) : wire.to(at::kFloat).mul_(n);
  return out;
}

Payload FloatCast::encode(const at::Tensor& x, Context& ctx) {
  Payload p;
  if (!fastPath(x)) {
    checkGradient(x, name());
    checkNonEmpty(x, name());
    p.tensors.push_back(wire_ == at::kFloat ? x.clone() : x.to(wire_));
    return p;
  }
  checkGradientLayout(x, name());
  checkNonEmpty(x, name());
  ScopedPhase s(ctx.times, &PhaseTimes::encode);
  p.tensors.push_back(castChecked(x, 1.0f, wireCache_));
  return p;
}

at::Tensor FloatCast::decode(const Payload& p, int64_t d, Context& ctx) {
  GZ_CHECK(p.tensors.size() == 1 && p.tensors[0].numel() == d && p.tensors[0].scalar_type() == wire_,
           "{}: payload does not hold {} {} values", name(), d, c10::toString(wire_));
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  const at::Tensor& w = p.tensors[0];
  if (!fastPath(w) || !w.is_contiguous()) return wire_ == at::kFloat ? w.clone() : w.to(at::kFloat);
  return widen(w, 1.0f, meanCache_);
}

}  // namespace gradzip::compress
