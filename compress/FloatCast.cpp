// Implements compress/FloatCast.h: fp32 / fp16 / bf16 all-reduce baselines.
#include "compress/FloatCast.h"

#include "compress/FloatWire.h"
#include "util/Error.h"

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

Aggregated FloatCast::aggregate(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  checkNonEmpty(x, name());
  if (agreedNumel_ != x.numel()) {  // once per bucket: Gloo aborts on mismatched sizes
    checkSameNumelAcrossRanks(x.numel(), ctx, name());
    agreedNumel_ = x.numel();
  }
  const int n = ctx.comm.size();
  Aggregated out;
  if (wire_ == at::kFloat) {
    // Sum first, then divide: the exact counterpart of a plain all-reduce.
    out.mean = allReduceSum(x, ctx).div_(n);
    out.localApplied = x;
    return out;
  }
  at::Tensor wire;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    // Apply the division first to avoid overflow of the half-precision sum.
    wire = n == 1 ? x.to(wire_) : x.div(n).to(wire_);
  }
  at::Tensor sum = allReduceSum(wire, ctx);
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  out.mean = sum.to(at::kFloat);
  out.localApplied = n == 1 ? wire.to(at::kFloat) : wire.to(at::kFloat).mul_(n);
  return out;
}

Payload FloatCast::encode(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  checkNonEmpty(x, name());
  ScopedPhase s(ctx.times, &PhaseTimes::encode);
  Payload p;
  p.tensors.push_back(wire_ == at::kFloat ? x.clone() : x.to(wire_));
  return p;
}

at::Tensor FloatCast::decode(const Payload& p, int64_t d, Context& ctx) {
  GZ_CHECK(p.tensors.size() == 1 && p.tensors[0].numel() == d && p.tensors[0].scalar_type() == wire_,
           "{}: payload does not hold {} {} values", name(), d, c10::toString(wire_));
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  return wire_ == at::kFloat ? p.tensors[0].clone() : p.tensors[0].to(at::kFloat);
}

}  // namespace gradzip::compress
