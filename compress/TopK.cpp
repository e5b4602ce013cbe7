// Implements compress/TopK.h: top-K by magnitude, all-gather of values and
// indices, scatter-sum.
#include "compress/TopK.h"

#include "compress/FloatWire.h"
#include "compress/kernels/TopKSelect.h"
#include "compress/kernels/TopKSelectGeneric.h"
#include "util/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gradzip::compress {

namespace {

// v in the wire type, |v| beyond the type's largest finite value saturated to
// it: a plain cast rounds |v| > 65504 to ±Inf in fp16 (and the largest floats
// to ±Inf in bf16), which would reach every rank's mean after the finiteness
// check. Error feedback keeps the part cut off (localApplied holds the
// saturated value).
at::Tensor toWireSaturated(const at::Tensor& v, at::ScalarType wire) {
  double hi = 0;
  switch (wire) {
    case at::kHalf: hi = static_cast<double>(std::numeric_limits<c10::Half>::max()); break;
    case at::kBFloat16: hi = static_cast<double>(std::numeric_limits<c10::BFloat16>::max()); break;
    default: return v.to(wire);
  }
  return v.clamp(-hi, hi).to(wire);
}

}  // namespace

TopKOptions TopKOptions::fromYaml(YamlReader& r) {
  TopKOptions o;
  o.ratio = r.getDouble("ratio", o.ratio, 1e-9, 1.0);
  o.bits = r.getDouble("bits", o.bits, 0.0, 64.0);
  o.values = readFloatWire(r, "value_dtype", o.values);
  return o;
}

void TopKOptions::toYaml(YAML::Node& n) const {
  n["ratio"] = ratio;
  n["bits"] = bits;
  n["value_dtype"] = floatWireName(values);
}

int64_t TopKOptions::k(int64_t d) const {
  if (d <= 0) return 0;
  // b = (valueBits + 32) K / d  (paper §3.1.3 with fp16 values: b = 48K/d)
  const double raw = bits > 0 ? std::floor(bits * static_cast<double>(d) / (floatWireBits(values) + 32))
                              : std::round(ratio * static_cast<double>(d));
  return std::clamp<int64_t>(static_cast<int64_t>(raw), 1, d);
}

TopK::TopK(TopKOptions opts) : opts_(opts) {
  GZ_CHECK(opts_.ratio > 0 && opts_.ratio <= 1, "topk: ratio must be in (0, 1], got {}", opts_.ratio);
  GZ_CHECK(opts_.bits >= 0, "topk: bits must be >= 0, got {}", opts_.bits);
}

Capabilities TopK::capabilities() const {
  Capabilities c;
  c.summable = false;
  c.unbiased = false;
  // Aggregation is always an all-gather; "engine" names c10d's.
  c.collectives = {"allgather", "engine"};
  return c;
}

double TopK::bitsPerCoordinate(int64_t d, int) const {
  return d == 0 ? 0.0 : static_cast<double>((floatWireBits(opts_.values) + 32) * opts_.k(d)) / d;
}

Payload TopK::encode(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  checkNonEmpty(x, name());
  ScopedPhase s(ctx.times, &PhaseTimes::encode);
  const int64_t k = opts_.k(x.numel());
  // int32, ascending; the generic path selects the same indices in ATen ops.
  at::Tensor ix = fastPath(x) ? largestMagnitudes(x, k) : largestMagnitudesGeneric(x, k);
  Payload p;
  p.tensors.push_back(toWireSaturated(x.index_select(0, ix), opts_.values));
  p.tensors.push_back(ix);
  return p;
}

at::Tensor TopK::decode(const Payload& p, int64_t d, Context& ctx) {
  const int64_t k = opts_.k(d);
  GZ_CHECK(p.tensors.size() == 2 && p.tensors[0].numel() == k && p.tensors[1].numel() == k &&
               p.tensors[1].scalar_type() == at::kInt,
           "topk: payload does not hold {} values and {} int32 indices for d = {}", k, k, d);
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  return at::zeros({d}, p.tensors[0].options().dtype(at::kFloat))
      .index_put_({p.tensors[1].to(at::kLong)}, p.tensors[0].to(at::kFloat));
}

Aggregated TopK::aggregate(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  checkNonEmpty(x, name());
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, name());  // Gloo aborts on mismatched sizes
  Payload p = encode(x, ctx);
  const int n = ctx.comm.size();
  const int64_t d = x.numel();
  std::vector<at::Tensor> values(n), indices(n);
  {
    ScopedPhase s(ctx.times, &PhaseTimes::communicate);
    if (ctx.times) ctx.times->bytesSent += p.bytes();
    for (int r = 0; r < n; ++r) {
      values[r] = at::empty_like(p.tensors[0]);
      indices[r] = at::empty_like(p.tensors[1]);
    }
    std::vector<comm::Work> works{ctx.comm.allGather(values, p.tensors[0]), ctx.comm.allGather(indices, p.tensors[1])};
    comm::waitAll(works);
  }
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  Aggregated out;
  out.mean = at::zeros({d}, x.options());
  // Rank order is fixed, so every rank forms the same float sums (bit-identical);
  // one rank's indices are distinct, so index_add_ has no order to choose on a GPU either.
  for (int r = 0; r < n; ++r) out.mean.index_add_(0, indices[r].to(at::kLong), values[r].to(at::kFloat));
  out.mean.div_(n);
  out.localApplied = at::zeros({d}, x.options()).index_put_({p.tensors[1].to(at::kLong)}, p.tensors[0].to(at::kFloat));
  return out;
}

}  // namespace gradzip::compress
