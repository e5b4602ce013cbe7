// Implements the codec pieces of THC's device-generic path (compress/Thc.h,
// compress/CodecPath.h) in ATen operations on the input's device: block
// norms, the all-reduce form's uniform SQ and its saturating words, the ps
// form's table SQ and its decoders, and encode/decode. Each piece computes
// what its CPU counterpart (Thc.cpp, compress/kernels/ThcKernels.h,
// ThcTableKernels.h) computes, float operation for float operation where
// ATen has the same one, from the same counter-based noise
// (compress/kernels/CounterRngGeneric.h) and into the same wire formats. Two
// places differ in rounding only: the block norms sum their squares in
// another order (in double, then rounded to float), and the ps decoders form
// the kernels' fma in double (exact product, then two roundings).
#include "compress/Thc.h"

#include "compress/kernels/BitPack.h"
#include "compress/kernels/BitPackGeneric.h"
#include "compress/kernels/CounterRngGeneric.h"
#include "compress/kernels/HadamardGeneric.h"
#include "compress/kernels/SaturatingPackedSum.h"
#include "util/Error.h"

#include <vector>

namespace gradzip::compress {
namespace {

// A table column (thc::TableLookup's cells or ints) as int64 indices on `device`.
at::Tensor longOn(const std::vector<int32_t>& v, at::Device device) {
  return at::tensor(v, at::kInt).to(at::kLong).to(device);
}

// Per-block ranges M as a [numBlocks, 1] float32 column on `device`, to
// broadcast against a [numBlocks, B] view of a rotated vector.
at::Tensor rangeColumn(const at::Tensor& range, const RandomizedHadamard& rht, at::Device device) {
  return range.to(device, at::kFloat).contiguous().view({rht.numBlocks(), 1});
}

// a / v with a true division on a's device: CUDA's division by a CPU scalar
// multiplies by its reciprocal, which rounds differently from the kernels'
// float division, so the divisor is a one-element tensor beside a.
at::Tensor divExact(const at::Tensor& a, float v) { return a.div(at::full({1}, v, a.options().dtype(at::kFloat))); }

// fma(a, step, −M) as the kernels compute it, for float a, step and M: the
// product of two floats is exact in double, so only the sum rounds, twice
// (to double, then to float), which differs from the fma's single rounding
// only in rare cases.
at::Tensor fmaMinusM(const at::Tensor& a, const at::Tensor& step, const at::Tensor& M) {
  return (a.to(at::kDouble) * step.to(at::kDouble) - M.to(at::kDouble)).to(at::kFloat);
}

}  // namespace

at::Tensor Thc::blockNormsGeneric(const at::Tensor& x, const RandomizedHadamard& rht) {
  // As blockNorms: the RHT keeps each block's norm, so the zero-padded input's.
  at::Tensor padded = at::zeros({rht.paddedDim()}, x.options().dtype(at::kDouble));
  padded.narrow(0, 0, rht.dim()).copy_(x);
  return padded.view({rht.numBlocks(), rht.blockSize()}).square().sum(1).sqrt().to(at::kFloat);
}

at::Tensor Thc::quantizeGeneric(const at::Tensor& rotated, const at::Tensor& range, const RandomizedHadamard& rht,
                                uint64_t privateSeed) const {
  const at::Device dev = rotated.device();
  const float L = static_cast<float>((1 << (options_.bits - 1)) - 1);
  const at::Tensor M = rangeColumn(range, rht, dev);
  const at::Tensor live = M > 0;
  // §3.2.2: y = clamp(R·(L/M), −L, L), 0 where M = 0 (Thc::quantize).
  const at::Tensor scale = at::where(live, at::full_like(M, L).div_(M), at::zeros_like(M));
  at::Tensor y = at::where(live, (rotated.view({rht.numBlocks(), rht.blockSize()}) * scale).clamp_(-L, L),
                           at::zeros_like(M));
  // roundUniform (StochasticQuantize.h): c = floor((ceil(2^24·y) + 2^24 − 1 − k) / 2^24),
  // k = randomHalf(seed, i) >> 8; 2^24·y is exact in float, so its ceil is too.
  const at::Tensor yc = y.view({-1}).mul(16777216.0).ceil_().to(at::kLong);
  const at::Tensor k = at::bitwise_right_shift(generic::randomHalf(privateSeed, 0, rht.paddedDim(), dev), 8);
  return at::bitwise_right_shift(yc.sub_(k).add_(16777215), 24).to(at::kInt);
}

at::Tensor Thc::dequantizeSumGeneric(const at::Tensor& sums, const at::Tensor& range, const RandomizedHadamard& rht,
                                     int n) const {
  const float L = static_cast<float>((1 << (options_.bits - 1)) - 1);
  const at::Tensor step = divExact(rangeColumn(range, rht, sums.device()), L);
  const at::Tensor s = sums.to(at::kFloat).view({rht.numBlocks(), rht.blockSize()});
  return (n == 1 ? s * step : divExact(s, static_cast<float>(n)).mul_(step)).view({-1});
}

at::Tensor Thc::packWordsGeneric(const at::Tensor& codes, int bits) {
  const int per = SaturatingPackedSum::codesPerWord(bits);
  const int64_t n = codes.numel(), words = SaturatingPackedSum::numWords(n, bits);
  const int64_t L = (int64_t{1} << (bits - 1)) - 1;
  // Offset codes c + L in `bits`-bit fields; the unused trailing fields hold
  // code 0 (stored L), as SaturatingPackedSum::pack leaves them.
  at::Tensor fields = at::full({words * per}, L, codes.options().dtype(at::kLong));
  fields.narrow(0, 0, n).copy_(codes.to(at::kLong).add(L));
  const at::Tensor shifts = at::arange(per, fields.options()).mul_(bits);
  const at::Tensor w = at::bitwise_left_shift(fields.view({words, per}), shifts).sum(1);  // disjoint bits: sum = or
  if (SaturatingPackedSum::wordType(bits) == at::kByte) return w.to(at::kByte);
  // int32 words hold the low 32 bits as their two's-complement pattern.
  return at::where(w >= (int64_t{1} << 31), w - (int64_t{1} << 32), w).to(at::kInt);
}

at::Tensor Thc::unpackWordsGeneric(const at::Tensor& words, int bits, int64_t n) {
  const int per = SaturatingPackedSum::codesPerWord(bits);
  const int64_t L = (int64_t{1} << (bits - 1)) - 1;
  GZ_CHECK(words.numel() >= SaturatingPackedSum::numWords(n, bits), "thc: {} words hold fewer than {} codes",
           words.numel(), n);
  at::Tensor w = words.contiguous().view({-1}).to(at::kLong);
  if (words.scalar_type() != at::kByte) w = at::bitwise_and(w, int64_t{0xFFFFFFFF});
  const at::Tensor shifts = at::arange(per, w.options()).mul_(bits);
  const at::Tensor fields = at::bitwise_and(at::bitwise_right_shift(w.unsqueeze(1), shifts), (int64_t{1} << bits) - 1);
  return fields.view({-1}).narrow(0, 0, n).sub(L).to(at::kInt);
}

at::Tensor Thc::tableCodesGeneric(const at::Tensor& rotated, const at::Tensor& range, const RandomizedHadamard& rht,
                                  const thc::TableLookup& table, uint64_t seed) {
  const at::Device dev = rotated.device();
  const float g = static_cast<float>(table.g);
  const at::Tensor M = rangeColumn(range, rht, dev);
  // Alg. 2 lines 8–9: clamp to [m, M] = [−M, M] and map to the g-grid,
  // y = min(max((v − m)·g/(M − m), 0), g); g/2 where M <= 0 (decodes to 0).
  const at::Tensor scale = at::full_like(M, g).div_(M * 2);
  const at::Tensor v = at::clamp(rotated.view({rht.numBlocks(), rht.blockSize()}), -M, M);
  const at::Tensor y = at::where(M > 0, ((v + M) * scale).clamp_(0.0f, g), at::full_like(M, 0.5f * g)).view({-1});
  // Line 10: SQ onto the table between T(z) <= y < T(z+1) (TableQuantizer::quantize).
  const at::Tensor cell = y.to(at::kInt).clamp_max_(table.g - 1).to(at::kLong);  // y >= 0: truncation is floor
  const at::Tensor z = longOn(table.cell, dev).index_select(0, cell);
  const at::Tensor T = at::tensor(table.values, at::kFloat).to(dev);
  const at::Tensor lo = T.index_select(0, z), hi = T.index_select(0, z + 1);
  const at::Tensor u = generic::uniform01Half(seed, 0, rht.paddedDim(), dev);
  return z + (u * (hi - lo) < (y - lo)).to(at::kLong);
}

at::Tensor Thc::tableValuesGeneric(const at::Tensor& codes, const at::Tensor& range, const RandomizedHadamard& rht,
                                   const thc::TableLookup& table) {
  const at::Device dev = codes.device();
  const at::Tensor M = rangeColumn(range, rht, dev);
  const at::Tensor step = divExact(M * 2, static_cast<float>(table.g));
  const at::Tensor T = at::tensor(table.values, at::kFloat).to(dev).index_select(0, codes.to(at::kLong).view({-1}));
  return fmaMinusM(T.view({rht.numBlocks(), rht.blockSize()}), step, M).view({-1});
}

at::Tensor Thc::sumValuesGeneric(const at::Tensor& sums, const at::Tensor& range, const RandomizedHadamard& rht,
                                 int n, int g) {
  const at::Tensor M = rangeColumn(range, rht, sums.device());
  const at::Tensor step = divExact(M * 2, static_cast<float>(g));
  const at::Tensor mean = divExact(sums.to(at::kFloat), static_cast<float>(n)).view({rht.numBlocks(), rht.blockSize()});
  return fmaMinusM(mean, step, M).view({-1});
}

Payload Thc::encodeGeneric(const at::Tensor& xIn, Context& ctx) {
  checkGradient(xIn, "thc");
  GZ_CHECK(xIn.numel() > 0, "thc: empty gradient");
  ScopedPhase timer(ctx.times, &PhaseTimes::encode);
  const at::Tensor x = xIn.contiguous();
  const auto rht = rotation(x.numel());
  const at::Tensor rotated = generic::rhtForward(rht, x, ctx.sharedSeed());
  // The payload's first tensor is what the decoder needs for M: the block
  // norms (THC's range), or the block maxima themselves (range: max).
  Payload p;
  if (options_.deployment == "ps") {
    const at::Tensor norms = blockNormsGeneric(x, rht);
    const at::Tensor z = tableCodesGeneric(rotated, rangeOf(norms, rht), rht, tableFor(1), ctx.privateSeed());
    p.tensors.push_back(norms);
    p.tensors.push_back(generic::packBits(z, bitsFor(1), /*checked=*/false));
    return p;
  }
  const at::Tensor header = maxRange() ? blockMaxima(rotated, rht) : blockNormsGeneric(x, rht);
  const at::Tensor range = maxRange() ? header : rangeOf(header, rht);
  p.tensors.push_back(header);
  p.tensors.push_back(packWordsGeneric(quantizeGeneric(rotated, range, rht, ctx.privateSeed()), fieldBits()));
  return p;
}

at::Tensor Thc::decodeGeneric(const Payload& p, int64_t d, Context& ctx) {
  const auto rht = rotation(d);
  const at::Tensor& wire = p.tensors[1];
  const at::Tensor header = p.tensors[0].to(wire.device(), at::kFloat).contiguous();
  if (options_.deployment == "ps") {
    const int b = bitsFor(1);
    GZ_CHECK(wire.scalar_type() == at::kByte && wire.numel() == packedBytes(rht.paddedDim(), b),
             "thc: malformed payload for d = {}: {} code bytes, expected {}", d, wire.numel(),
             packedBytes(rht.paddedDim(), b));
    const at::Tensor z = generic::unpackBits(wire.contiguous(), b, rht.paddedDim(), at::kLong);
    return generic::rhtInverse(rht, tableValuesGeneric(z, rangeOf(header, rht), rht, tableFor(1)), ctx.sharedSeed());
  }
  const at::Tensor range = maxRange() ? header : rangeOf(header, rht);
  const at::Tensor sums = unpackWordsGeneric(wire, fieldBits(), rht.paddedDim());
  return generic::rhtInverse(rht, dequantizeSumGeneric(sums, range, rht, 1), ctx.sharedSeed());
}

}  // namespace gradzip::compress
