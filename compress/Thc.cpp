// Implements the codec half of compress/Thc.h, shared by both deployments:
// the rotation, the block norms and ranges, quantisation and dequantisation,
// and encode/decode (one worker). The options, sizes and table are in
// ThcConfig.cpp; the collective halves in ThcAggregate.cpp.
#include "compress/Thc.h"

#include "compress/kernels/BitPack.h"
#include "compress/kernels/SaturatingPackedSum.h"
#include "compress/kernels/SimdKernels.h"
#include "compress/kernels/StochasticQuantize.h"
#include "compress/kernels/ThcKernels.h"
#include "compress/kernels/ThcTableKernels.h"
#include "util/Error.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

namespace gradzip::compress {
namespace {

// Calls f(lo, hi, M[block]) for the runs of [b, e) that lie in one block of B
// coordinates: the per-block range is read once per run, not divided out of
// every index.
template <class F>
void forBlockRuns(int64_t b, int64_t e, int64_t B, F&& f, const float* M) {
  while (b < e) {
    const int64_t blk = b / B, hi = std::min(e, (blk + 1) * B);
    f(b, hi, M[blk]);
    b = hi;
  }
}

}  // namespace

RandomizedHadamard Thc::rotation(int64_t d) const { return RandomizedHadamard(d, options_.rotationBlockLog2); }

at::Tensor Thc::blockNorms(const at::Tensor& x, const RandomizedHadamard& rht) {
  // The RHT is orthonormal per block, so a block's norm after rotation equals
  // the norm of the zero-padded block before it (THC §5.2 opt. 1: the norm round
  // runs in parallel with the transform).
  at::Tensor norms = at::empty({rht.numBlocks()}, at::kFloat);
  requireFinite(thc::blockNorms(x.data_ptr<float>(), rht, norms.data_ptr<float>()), "thc");
  return norms;
}

Thc::Quantized Thc::quantize(const at::Tensor& rotated, const at::Tensor& range, const RandomizedHadamard& rht,
                             uint64_t privateSeed) const {
  const int64_t dp = rht.paddedDim(), B = rht.blockSize();
  Quantized q;
  q.range = range.contiguous();
  const float* R = rotated.data_ptr<float>();
  const float* M = q.range.data_ptr<float>();
  q.values = at::empty({dp}, at::kFloat);
  float* X = q.values.data_ptr<float>();
  auto y = at::empty({dp}, at::kFloat);
  float* Y = y.data_ptr<float>();
  const int L = (1 << (options_.bits - 1)) - 1;
  // §3.2.2: signed zero-centred codes, y = clamp(x)·L/M ∈ [−L, L].
  at::parallel_for(0, dp, 16384, [&](int64_t b, int64_t e) {
    forBlockRuns(b, e, B, [&](int64_t lo, int64_t hi, float m) {
      const float scale = m > 0 ? static_cast<float>(L) / m : 0.0f;
      for (int64_t i = lo; i < hi; ++i)
        Y[i] = m > 0 ? std::min(std::max(R[i] * scale, static_cast<float>(-L)), static_cast<float>(L)) : 0.0f;
    }, M);
  });
  q.codes = at::empty({dp}, at::kInt);
  int32_t* C = q.codes.data_ptr<int32_t>();
  quantizeUniform(Y, dp, privateSeed, 0, C);
  forBlockRuns(0, dp, B, [&](int64_t lo, int64_t hi, float m) {
    const float step = m / L;
    for (int64_t i = lo; i < hi; ++i) X[i] = static_cast<float>(C[i]) * step;
  }, M);
  return q;
}

at::Tensor Thc::dequantizeSum(const at::Tensor& sums, const at::Tensor& range, const RandomizedHadamard& rht,
                              int n) const {
  const int64_t dp = rht.paddedDim(), B = rht.blockSize();
  auto out = at::empty({dp}, at::kFloat);
  float* o = out.data_ptr<float>();
  const int32_t* s = sums.data_ptr<int32_t>();
  const float* M = range.data_ptr<float>();
  const float L = static_cast<float>((1 << (options_.bits - 1)) - 1);
  forBlockRuns(0, dp, B, [&](int64_t lo, int64_t hi, float m) {
    const float step = m / L;
    for (int64_t i = lo; i < hi; ++i) o[i] = (static_cast<float>(s[i]) / n) * step;
  }, M);
  return out;
}


at::Tensor Thc::rotateQuantizePs(const at::Tensor& x, const at::Tensor& range, const RandomizedHadamard& rht, int n,
                                 Context& ctx) {
  const int64_t dp = rht.paddedDim();
  rotated_.resize(static_cast<size_t>(dp));
  rht.forwardUnscaled(x.data_ptr<float>(), ctx.sharedSeed(), rotated_.data());
  const int b = bitsFor(n);
  at::Tensor codes = simd::reusableBuffer(codeCache_, packedBytes(dp, b), at::kByte);
  // RandomizedHadamard::forward's orthonormal scale, applied inside the pass.
  thc::quantizeTablePack(rotated_.data(), dp, rht.blockSize(), range.data_ptr<float>(), rht.scale(), tableFor(n), b,
                         ctx.privateSeed(), codes.data_ptr<uint8_t>());
  return codes;
}

at::Tensor Thc::inverseOfRotated(const RandomizedHadamard& rht, uint64_t sharedSeed, at::Tensor& cache) {
  at::Tensor out = simd::reusableBuffer(cache, rht.dim(), at::kFloat);
  rht.inverseInPlace(rotated_.data(), sharedSeed, out.data_ptr<float>());
  return out;
}

double Thc::rangeScale(const RandomizedHadamard& rht) const {
  return tp_ / std::sqrt(static_cast<double>(rht.blockSize()));
}

at::Tensor Thc::rangeOf(const at::Tensor& norms, const RandomizedHadamard& rht) const {
  return (norms.to(at::kDouble) * rangeScale(rht)).to(at::kFloat).contiguous();
}

at::Tensor Thc::blockMaxima(const at::Tensor& rotated, const RandomizedHadamard& rht) {
  return rotated.view({rht.numBlocks(), rht.blockSize()}).abs().amax(1).contiguous();
}

Aggregated Thc::aggregate(const at::Tensor& x, Context& ctx) {
  const bool fast = fastPath(x);
  if (fast && !maxRange()) {
    checkGradientLayout(x, "thc");  // finiteness: checked in the block norms' pass (blockNorms)
  } else {
    checkGradient(x, "thc");
  }
  GZ_CHECK(x.numel() > 0, "thc: empty gradient");
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, "thc");  // Gloo aborts on mismatched sizes
  if (!fast) return options_.deployment == "ps" ? aggregatePsGeneric(x, ctx) : aggregateAllReduceGeneric(x, ctx);
  if (options_.deployment == "ps") return aggregatePs(x, ctx);
  return maxRange() ? aggregateAllReduceMax(x, ctx) : aggregateAllReduce(x, ctx);
}

Payload Thc::encode(const at::Tensor& x, Context& ctx) {
  if (!fastPath(x)) return encodeGeneric(x, ctx);
  if (options_.deployment == "allreduce" && !maxRange()) {
    checkGradientLayout(x, "thc");
    GZ_CHECK(x.numel() > 0, "thc: empty gradient");
    ScopedPhase timer(ctx.times, &PhaseTimes::encode);
    const auto rht = rotation(x.numel());
    // One rank, so no norm round: the block norms come out of the rotation pass.
    at::Tensor norms = simd::reusableBuffer(normCache_, rht.numBlocks(), at::kFloat);
    thc::NormsInPass fused;
    fused.norms = norms.data_ptr<float>();
    fused.rangeScale = rangeScale(rht);
    at::Tensor words = thc::rotateQuantizePack(x.data_ptr<float>(), nullptr, rht, options_.bits, fieldBits(),
                                               ctx.sharedSeed(), ctx.privateSeed(), scratch_, wordCache_, &fused);
    requireFinite(fused.finite, "thc");
    Payload p;
    p.tensors.push_back(norms);
    p.tensors.push_back(words);
    return p;
  }
  if (!maxRange())
    checkGradientLayout(x, "thc");  // finiteness: checked in the block norms' pass (blockNorms)
  else
    checkGradient(x, "thc");
  GZ_CHECK(x.numel() > 0, "thc: empty gradient");
  ScopedPhase timer(ctx.times, &PhaseTimes::encode);
  const auto xc = x.contiguous();
  const auto rht = rotation(x.numel());
  // The payload's first tensor is what the decoder needs for M: the block norms
  // (THC's range), or the block maxima themselves (range: max).
  Payload p;
  if (options_.deployment == "ps") {
    const at::Tensor norms = blockNorms(xc, rht);
    p.tensors.push_back(norms);
    p.tensors.push_back(rotateQuantizePs(xc, rangeOf(norms, rht), rht, 1, ctx));
    return p;
  }
  at::Tensor header, range;
  const at::Tensor rotated = rht.forward(xc, ctx.sharedSeed());
  if (maxRange()) {
    header = range = blockMaxima(rotated, rht);
  } else {
    header = blockNorms(xc, rht);
    range = rangeOf(header, rht);
  }
  auto q = quantize(rotated, range, rht, ctx.privateSeed());
  p.tensors.push_back(header);
  p.tensors.push_back(SaturatingPackedSum::pack(q.codes, fieldBits()));
  return p;
}

at::Tensor Thc::decode(const Payload& p, int64_t d, Context& ctx) {
  ScopedPhase timer(ctx.times, &PhaseTimes::decode);
  const auto rht = rotation(d);
  GZ_CHECK(p.tensors.size() == 2 && p.tensors[0].numel() == rht.numBlocks(), "thc: malformed payload for d = {}", d);
  if (!fastPath(p.tensors[1])) return decodeGeneric(p, d, ctx);
  if (options_.deployment == "allreduce" && maxRange()) {
    const at::Tensor range = p.tensors[0].cpu().contiguous();
    const auto sums = SaturatingPackedSum::unpack(p.tensors[1], fieldBits(), rht.paddedDim());
    return rht.inverse(dequantizeSum(sums, range, rht, 1), ctx.sharedSeed());
  }
  if (options_.deployment == "allreduce") {
    // Thc::rangeOf without tensor temporaries (the same double product, rounded once).
    const at::Tensor norms = p.tensors[0].cpu().contiguous();
    const float* l = norms.data_ptr<float>();
    const double scale = rangeScale(rht);
    ranges_.resize(static_cast<size_t>(rht.numBlocks()));
    for (int64_t b = 0; b < rht.numBlocks(); ++b) ranges_[b] = static_cast<float>(static_cast<double>(l[b]) * scale);
    return thc::unpackInverse(p.tensors[1], ranges_.data(), rht, options_.bits, fieldBits(), 1, ctx.sharedSeed(),
                              scratch_, meanCache_);
  }
  const auto range = rangeOf(p.tensors[0], rht);
  if (options_.deployment == "ps") {
    const at::Tensor codes = p.tensors[1].cpu().contiguous();
    const int b = bitsFor(1);
    GZ_CHECK(codes.scalar_type() == at::kByte && codes.numel() == packedBytes(rht.paddedDim(), b),
             "thc: malformed payload for d = {}: {} code bytes, expected {}", d, codes.numel(),
             packedBytes(rht.paddedDim(), b));
    rotated_.resize(static_cast<size_t>(rht.paddedDim()));
    thc::dequantizeCodes(codes.data_ptr<uint8_t>(), b, rht.paddedDim(), rht.blockSize(),
                         range.data_ptr<float>(), tableFor(1), rotated_.data());
    return inverseOfRotated(rht, ctx.sharedSeed(), meanCache_);
  }
  const auto sums = SaturatingPackedSum::unpack(p.tensors[1], fieldBits(), rht.paddedDim());
  return rht.inverse(dequantizeSum(sums, range, rht, 1), ctx.sharedSeed());
}

}  // namespace gradzip::compress
