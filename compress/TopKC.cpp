// Implements compress/TopKC.h: chunk-norm round, consensus chunk choice, FP16
// all-reduce of the chosen chunks.
#include "compress/TopKC.h"

#include "compress/FloatWire.h"
#include "util/Error.h"

#include <algorithm>
#include <cmath>

namespace gradzip::compress {

TopKCOptions TopKCOptions::fromYaml(YamlReader& r) {
  TopKCOptions o;
  o.chunk = r.getInt("chunk", o.chunk, 1, int64_t{1} << 30);
  o.bits = r.getDouble("bits", o.bits, 0.0, 64.0);
  o.chunks = r.getInt("chunks", o.chunks, 0);
  o.values = readFloatWire(r, "value_dtype", o.values);
  o.norms = readFloatWire(r, "norm_dtype", o.norms);
  return o;
}

void TopKCOptions::toYaml(YAML::Node& n) const {
  n["chunk"] = chunk;
  n["bits"] = bits;
  n["chunks"] = chunks;
  n["value_dtype"] = floatWireName(values);
  n["norm_dtype"] = floatWireName(norms);
}

int64_t TopKCOptions::selected(int64_t d) const {
  const int64_t nc = numChunks(d);
  if (nc == 0) return 0;
  if (chunks > 0) return std::min(chunks, nc);
  // Paper §3.1.2: b = 16(JC/d + 1/C), solved for J with the wire types' widths.
  const double j = std::floor((bits * static_cast<double>(d) - floatWireBits(norms) * static_cast<double>(nc)) /
                              (floatWireBits(values) * static_cast<double>(chunk)));
  return std::clamp<int64_t>(static_cast<int64_t>(std::max(j, 0.0)), 1, nc);
}

TopKC::TopKC(TopKCOptions opts) : opts_(opts) {
  GZ_CHECK(opts_.chunk >= 1, "topkc: chunk must be >= 1, got {}", opts_.chunk);
  GZ_CHECK(opts_.bits > 0 || opts_.chunks > 0, "topkc: set bits > 0 or chunks > 0");
}

Capabilities TopKC::capabilities() const {
  Capabilities c;
  c.summable = true;
  c.unbiased = false;
  c.collectives = {"engine", "ring", "tree", "ps"};
  return c;
}

double TopKC::bitsPerCoordinate(int64_t d, int) const {
  if (d == 0) return 0.0;
  const int64_t bits = floatWireBits(opts_.norms) * opts_.numChunks(d) +
                       floatWireBits(opts_.values) * opts_.selected(d) * opts_.chunk;
  return static_cast<double>(bits) / static_cast<double>(d);
}

at::Tensor TopKC::selectChunks(const at::Tensor& s, int64_t j) {
  const int64_t nc = s.numel();
  GZ_ASSERT(j >= 1 && j <= nc, "selectChunks: j = {} out of [1, {}]", j, nc);
  if (j == nc) return at::arange(nc, at::kLong);
  // The j-th largest sum is the threshold: take everything above it, then the
  // lowest-indexed chunks equal to it. at::topk's own tie order is unspecified.
  const at::Tensor thr = std::get<0>(at::topk(s, j, 0, true, /*sorted=*/false)).min();
  at::Tensor above = at::nonzero(s > thr).flatten();
  at::Tensor equal = at::nonzero(s == thr).flatten().narrow(0, 0, j - above.numel());
  return std::get<0>(at::sort(at::cat({above, equal})));
}

at::Tensor TopKC::chunked(const at::Tensor& x) const {
  const int64_t d = x.numel(), c = opts_.chunk, nc = opts_.numChunks(d);
  if (nc * c == d) return x.view({nc, c});
  at::Tensor padded = at::zeros({nc * c}, x.options());
  padded.narrow(0, 0, d).copy_(x);
  return padded.view({nc, c});
}

at::Tensor TopKC::wireNorms(const at::Tensor& xc, int n) const {
  at::Tensor sq = at::linalg_vector_norm(xc, 2, {1}).square_();
  if (n > 1) sq.div_(n);  // keep the n-rank sum within range (as for fp16 values)
  if (opts_.norms != at::kFloat) {
    const double hi = opts_.norms == at::kHalf ? 65504.0 : 3.3895313892515355e38;
    sq.clamp_max_(hi);  // saturate rather than round to Inf
  }
  return sq.to(opts_.norms);
}

at::Tensor TopKC::scatterChunks(const at::Tensor& values, const at::Tensor& chosen, int64_t d) const {
  const int64_t nc = opts_.numChunks(d), c = opts_.chunk;
  at::Tensor out = at::zeros({nc * c}, at::kFloat);
  out.view({nc, c}).index_copy_(0, chosen, values.to(at::kFloat).view({chosen.numel(), c}));
  return nc * c == d ? out : out.narrow(0, 0, d).clone();
}

Payload TopKC::encode(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  checkNonEmpty(x, name());
  ScopedPhase s(ctx.times, &PhaseTimes::encode);
  const at::Tensor xc = chunked(x);
  Payload p;
  p.tensors.push_back(wireNorms(xc, 1));
  const at::Tensor chosen = selectChunks(p.tensors[0].to(at::kFloat), opts_.selected(x.numel()));
  p.tensors.push_back(xc.index_select(0, chosen).view({-1}).to(opts_.values));
  return p;
}

at::Tensor TopKC::decode(const Payload& p, int64_t d, Context& ctx) {
  const int64_t nc = opts_.numChunks(d), j = opts_.selected(d);
  GZ_CHECK(p.tensors.size() == 2 && p.tensors[0].numel() == nc && p.tensors[1].numel() == j * opts_.chunk,
           "topkc: payload does not hold {} chunk norms and {} values for d = {}", nc, j * opts_.chunk, d);
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  return scatterChunks(p.tensors[1], selectChunks(p.tensors[0].to(at::kFloat), j), d);
}

Aggregated TopKC::aggregate(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  checkNonEmpty(x, name());
  if (agreedNumel_ != x.numel()) {  // once per bucket: Gloo aborts on mismatched sizes
    checkSameNumelAcrossRanks(x.numel(), ctx, name());
    agreedNumel_ = x.numel();
  }
  const int n = ctx.comm.size();
  const int64_t d = x.numel();
  at::Tensor xc, norms;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    xc = chunked(x);
    norms = wireNorms(xc, n);
  }
  // Round 1 (step 1): s_p = Σ_i ||c_p^(i)||² / n, all-reduced in the norm wire type.
  const at::Tensor sums = allReduceSum(norms, ctx);
  at::Tensor chosen, wire, rows;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    // Step 2: the consensus top-J chunks; identical sums give identical choices.
    chosen = selectChunks(sums.to(at::kFloat), opts_.selected(d));
    rows = xc.index_select(0, chosen).view({-1});
    // Half types: divide by n before the cast so the sum cannot overflow.
    wire = opts_.values == at::kFloat ? rows : rows.div(n).to(opts_.values);
  }
  const at::Tensor sum = allReduceSum(wire, ctx);
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  Aggregated out;
  if (opts_.values == at::kFloat) {
    out.mean = scatterChunks(sum.div(n), chosen, d);  // sum first, then divide: exact at ratio 1
    out.localApplied = scatterChunks(rows, chosen, d);
  } else {
    out.mean = scatterChunks(sum, chosen, d);
    out.localApplied = scatterChunks(wire.to(at::kFloat).mul_(n), chosen, d);
  }
  return out;
}

}  // namespace gradzip::compress
