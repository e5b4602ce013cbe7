// The device-generic path of compress/TopKC.h (compress/CodecPath.h): the
// chunk-norm round, the consensus choice and the chunk all-reduce in ATen ops on
// x's device, bit for bit what the CPU kernels of TopKC.cpp compute. The
// squared chunk norms are the one place where that takes care: float sums
// depend on their order, and an FP16 norm that differs in one bit can change
// which chunks win. So chunkNorms() repeats the summation of the kernel that
// simd::chunkSquaredNorms (compress/kernels/SimdKernels.cpp) runs at the
// process's SIMD level, on any device: the same lanes, the same fused
// multiply-adds (emulated exactly), the same reduction tree. A GPU run thus
// chooses the chunks a CPU run on the same host would; the tests compare every
// tier bit for bit.
#include "compress/TopKC.h"

#include "compress/FloatWire.h"
#include "compress/kernels/SimdKernels.h"
#include "compress/kernels/TopKSelectGeneric.h"
#include "util/Error.h"

#include <limits>

namespace gradzip::compress {

namespace {

constexpr int64_t kLanes = 16;  // the kernels' partial sums per chunk: coordinate i goes to lane i mod 16

// fma(v, v, a) with one rounding to float, as vfmadd231ps: v² is exact in
// double, a + v² is rounded to odd in double (the TwoSum error says whether
// the sum was exact; if not and the last bit is even, step one ulp towards
// the exact value), and rounding that to float rounds correctly, since double
// has more than 24 + 2 bits (Boldo & Melquiond, "Emulation of FMA and
// correctly rounded sums: proved algorithms using rounding to odd", IEEE
// Trans. Computers 57(4), 2008). Each step is its own ATen kernel, so no
// compiler contracts it into a different fused operation.
at::Tensor fmaSquare(const at::Tensor& a, const at::Tensor& v) {
  const at::Tensor ad = a.to(at::kDouble), vd = v.to(at::kDouble);
  const at::Tensor p = vd.mul(vd);
  const at::Tensor s = ad.add(p);
  const at::Tensor bv = s.sub(ad);
  const at::Tensor err = ad.sub(s.sub(bv)).add(p.sub(bv));  // Knuth's TwoSum: s + err == a + v² exactly
  const at::Tensor even = s.view(at::kLong).bitwise_and(1).eq(0);
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor towards = at::where(err.gt(0), at::full_like(s, inf), at::full_like(s, -inf));
  return at::where(err.ne(0).logical_and(even), at::nextafter(s, towards), s).to(at::kFloat);
}

// Σ over one chunk's 16 lane sums acc [m, 16] in the kernel's reduction order.
at::Tensor reduceLanes(const at::Tensor& acc, simd::Level level) {
  if (level == simd::Level::kAvx512) {
    // reduce16 / _mm512_reduce_add_ps: fold the halves, 16 -> 8 -> 4 -> 2 -> 1.
    at::Tensor t = acc;
    for (int64_t w = kLanes / 2; w >= 1; w /= 2) t = t.narrow(1, 0, w).add(t.narrow(1, w, w));
    return t.view({-1});
  }
  // chunkSum256 adds lanes l and l + 8, then the horizontal-add tree sums
  // neighbours: ((b0 + b1) + (b2 + b3)) + ((b4 + b5) + (b6 + b7)).
  at::Tensor t = acc.narrow(1, 0, 8).add(acc.narrow(1, 8, 8));
  for (int64_t w = 4; w >= 1; w /= 2) t = t.slice(1, 0, 2 * w, 2).add(t.slice(1, 1, 2 * w, 2));
  return t.view({-1});
}

// simd::chunkSquaredNorms of x [d] with chunks of C, in ATen ops: float [ceil(d/C)].
at::Tensor chunkNorms(const at::Tensor& x, int64_t C) {
  const int64_t d = x.numel(), nc = (d + C - 1) / C;
  const simd::Level level = simd::level();
  if (C % kLanes != 0 || level == simd::Level::kPortable) {
    // chunkSqScalar: acc[i & 15] += x[i]·x[i] (multiply, then add: two
    // roundings), then s = acc[0] + acc[1] + ... + acc[15] in order. Zero
    // padding (of the last chunk, and of C to a multiple of 16) adds exact
    // zeros to non-negative sums, so it changes no bit.
    const int64_t steps = (C + kLanes - 1) / kLanes;
    const at::Tensor v = at::constant_pad_nd(at::constant_pad_nd(x, {0, nc * C - d}).view({nc, C}),
                                             {0, steps * kLanes - C})
                             .view({nc, steps, kLanes});
    at::Tensor acc = at::zeros({nc, kLanes}, x.options());
    for (int64_t t = 0; t < steps; ++t) {
      const at::Tensor vt = v.select(1, t);
      acc = acc.add(vt.mul(vt));
    }
    at::Tensor s = acc.select(1, 0);
    for (int64_t l = 1; l < kLanes; ++l) s = s.add(acc.select(1, l));
    return s.contiguous();
  }
  // chunkSq512 / chunkSq256: whole chunks accumulate lane l = i mod 16 with
  // FMAs, then reduce the lanes by the tier's tree; a last partial chunk is one
  // sequential FMA chain.
  const int64_t full = d / C;
  at::Tensor out = at::empty({nc}, x.options());
  if (full > 0) {
    const at::Tensor v = x.narrow(0, 0, full * C).view({full, C / kLanes, kLanes});
    at::Tensor acc = at::zeros({full, kLanes}, x.options());
    for (int64_t t = 0; t < C / kLanes; ++t) acc = fmaSquare(acc, v.select(1, t));
    out.narrow(0, 0, full).copy_(reduceLanes(acc, level));
  }
  if (full < nc) {
    // The kernels' short last chunk: one sequential FMA chain, s = fma(x_i, x_i, s).
    at::Tensor s = at::zeros({1}, x.options());
    for (int64_t i = full * C; i < d; ++i) s = fmaSquare(s, x.narrow(0, i, 1));
    out.narrow(0, full, 1).copy_(s);
  }
  return out;
}

}  // namespace

at::Tensor TopKC::wireNormsGeneric(const at::Tensor& x, int n) const {
  at::Tensor sq = chunkNorms(x, opts_.chunk);
  if (n > 1) sq = sq.div(static_cast<float>(n));  // as wireNorms: keep the n-rank sum within range
  if (opts_.norms != at::kFloat)
    sq = sq.clamp_max(opts_.norms == at::kHalf ? 65504.0 : 3.3895313892515355e38);  // saturate, not Inf
  return opts_.norms == at::kFloat ? sq : sq.to(opts_.norms);
}

at::Tensor TopKC::chooseGeneric(const at::Tensor& sums, int64_t d) const {
  return largestKeys(orderKeys(sums), opts_.selected(d));
}

at::Tensor TopKC::gatherChunksGeneric(const at::Tensor& x, const at::Tensor& chosen, float div) const {
  const int64_t c = opts_.chunk, d = x.numel(), nc = opts_.numChunks(d);
  at::Tensor v = at::constant_pad_nd(x, {0, nc * c - d}).view({nc, c}).index_select(0, chosen).view({-1});
  if (div != 1.0f) v = v.div(div);
  return opts_.values == at::kFloat ? v.contiguous() : v.to(opts_.values);
}

at::Tensor TopKC::scatterChunksGeneric(const at::Tensor& values, const at::Tensor& chosen, int64_t d, float mul,
                                       float div) const {
  const int64_t c = opts_.chunk, nc = opts_.numChunks(d);
  at::Tensor v = values.to(at::kFloat).view({-1, c});
  if (opts_.values != at::kFloat && mul != 1.0f) v = v.mul(mul);
  if (opts_.values == at::kFloat && div != 1.0f) v = v.div(div);
  at::Tensor out = at::zeros({nc, c}, v.options());
  out.index_copy_(0, chosen, v);
  return out.view({-1}).narrow(0, 0, d).contiguous();
}

Payload TopKC::encodeGeneric(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  checkNonEmpty(x, name());
  ScopedPhase s(ctx.times, &PhaseTimes::encode);
  Payload p;
  p.tensors.push_back(wireNormsGeneric(x, 1));
  p.tensors.push_back(gatherChunksGeneric(x, chooseGeneric(p.tensors[0], x.numel()), 1.0f));
  return p;
}

at::Tensor TopKC::decodeGeneric(const Payload& p, int64_t d, Context& ctx) {
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  return scatterChunksGeneric(p.tensors[1], chooseGeneric(p.tensors[0], d), d, 1.0f, 1.0f);
}

Aggregated TopKC::aggregateGeneric(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());  // throws on NaN/Inf before anything is sent
  checkNonEmpty(x, name());
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, name());  // Gloo aborts on mismatched sizes
  const int n = ctx.comm.size();
  const int64_t d = x.numel();
  at::Tensor norms;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    norms = wireNormsGeneric(x, n);
  }
  // Round 1 (step 1): s_p = Σ_i ||c_p^(i)||² / n, all-reduced in the norm wire type.
  const at::Tensor sums = allReduceSum(norms, ctx);
  at::Tensor chosen, wire;
  const bool half = opts_.values != at::kFloat;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    chosen = chooseGeneric(sums, d);  // step 2: identical sums give identical choices
    wire = gatherChunksGeneric(x, chosen, half ? static_cast<float>(n) : 1.0f);
  }
  const at::Tensor sum = allReduceSum(wire, ctx);
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  Aggregated out;
  if (!half) {
    out.mean = scatterChunksGeneric(sum, chosen, d, 1.0f, static_cast<float>(n));  // sum first, then divide
    out.localApplied = scatterChunksGeneric(wire, chosen, d, 1.0f, 1.0f);
  } else {
    out.mean = scatterChunksGeneric(sum, chosen, d, 1.0f, 1.0f);
    out.localApplied = scatterChunksGeneric(wire, chosen, d, static_cast<float>(n), 1.0f);
  }
  return out;
}

}  // namespace gradzip::compress
