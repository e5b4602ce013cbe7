// The device-generic codec of compress/NaturalCompression.h
// (compress/CodecPath.h): C_nat's 8-bit wire code computed on the binary32
// bits with int64 ATen operations on x's device, and the parameter-server
// owner's exact int64 sum with saturation. Every operation is that of
// naturalEncode / naturalDecode / the CPU owner, so the deterministic variant
// and the owner's re-compression give the same bits on both paths. The
// stochastic encoder's noise differs: the CPU kernel draws it from AES rounds
// (compress/kernels/AesNoise.h), which have no reasonable ATen form, so the
// generic path takes coordinate i's 23 random bits from randomHalf(seed, i)
// (compress/kernels/CounterRngGeneric.h). Both are uniform on [0, 2^23) and
// independent across coordinates and streams, so the codes differ between the
// paths but follow the same distribution (Definition 1).
#include "compress/NaturalCompression.h"

#include "compress/kernels/CounterRngGeneric.h"
#include "util/Error.h"

#include <cmath>
#include <limits>

namespace gradzip::compress {
namespace {

constexpr int64_t kLowestBits = int64_t{127 + kNatMinExp} << 23;  // binary32 bits of 2^−50

// naturalEncode of every element of t (float, contiguous, finite) with its 23
// random bits in the low bits of rnd (int64; unused when !stochastic). Adds
// the 2^10 clips to *clips (an int64 scalar tensor) when set.
at::Tensor encodeBits(const at::Tensor& t, const at::Tensor& rnd, bool stochastic, at::Tensor* clips) {
  const auto u = t.view(at::kInt).to(at::kLong).bitwise_and_(0xFFFFFFFFLL);
  const auto a = u.bitwise_and(0x7FFFFFFFLL);
  const auto sign = u.bitwise_right_shift(31).bitwise_left_shift_(7);  // 0 or 0x80
  const auto r = stochastic ? rnd.bitwise_and(0x7FFFFFLL) : at::full_like(a, 0x400000LL);
  // |t| >= 2^−50: naturalRound on the bits; a carry into exponent 0xFF (the
  // 2^127 saturation) is clipped at 2^10 as well.
  auto e = a.add(r).bitwise_and_(0xFF800000LL).bitwise_right_shift_(23).sub_(127);
  const auto big = a.ge(kLowestBits);
  const auto clipped = e.gt(kNatMaxExp).logical_and_(big);
  if (clips) clips->add_(clipped.sum());
  const auto normal = sign.bitwise_or(0x40).bitwise_or_(e.clamp_max_(kNatMaxExp).sub_(kNatMinExp));
  // |t| < 2^−50: 2^−50 with probability |t|/2^−50, else 0 (the nearer of the two when deterministic).
  const float lowest = std::ldexp(1.0f, kNatMinExp);
  const auto absT = t.abs();
  const auto up = stochastic ? r.to(at::kFloat).mul_(1.0f / 8388608.0f).mul_(lowest).lt(absT)
                             : absT.mul(2.0f).ge(lowest);
  const auto tiny = at::where(up, sign.bitwise_or(0x40), at::zeros_like(sign));
  const auto codes = at::where(big, normal, at::where(a.eq(0), at::zeros_like(sign), tiny));
  return codes.to(at::kByte);
}

}  // namespace

at::Tensor NaturalCompression::encodeCodesGeneric(const at::Tensor& x, uint64_t seed, int64_t* clipped) const {
  checkGradient(x, "cnat");  // finiteness: the generic path has no fused scan
  const auto xc = x.contiguous();
  const auto rnd = options_.deterministic ? at::Tensor() : generic::randomHalf(seed, 0, xc.numel(), xc.device());
  auto clips = at::zeros({}, xc.options().dtype(at::kLong));
  auto codes = encodeBits(xc, rnd, !options_.deterministic, clipped ? &clips : nullptr);
  if (clipped) *clipped += clips.item<int64_t>();
  return codes;
}

at::Tensor NaturalCompression::decodeCodesGeneric(const at::Tensor& codesIn) {
  const auto c = codesIn.contiguous().to(at::kInt);
  const auto nonZero = c.bitwise_and(0x40).ne(0);
  // 2^((c & 0x3F) − 50) from its exponent field; exact for every code.
  const auto mag = c.bitwise_and(0x3F).add_(127 + kNatMinExp).bitwise_left_shift_(23).view(at::kFloat);
  const auto v = at::where(nonZero, mag, at::zeros_like(mag));
  return at::where(c.bitwise_and(0x80).ne(0).logical_and_(nonZero), v.neg(), v);
}

at::Tensor NaturalCompression::ownerReduceGeneric(const std::vector<at::Tensor>& recv, int64_t offset, int64_t len,
                                                  int n, uint64_t ownerSeed) const {
  const auto options = recv.front().options().dtype(at::kLong);
  const int64_t maxV = std::numeric_limits<int64_t>::max(), minV = std::numeric_limits<int64_t>::min();
  auto sum = at::zeros({len}, options);
  auto events = at::zeros({}, options);
  for (const auto& r : recv) {
    // naturalFixed: ±2^(e+50), or 0; added in rank order, saturating as the CPU owner does.
    const auto c = r.narrow(0, 0, len).to(at::kLong);
    const auto mag = at::ones_like(c).bitwise_left_shift_(c.bitwise_and(0x3F));
    auto v = at::where(c.bitwise_and(0x80).ne(0), mag.neg(), mag);
    v = at::where(c.bitwise_and(0x40).ne(0), v, at::zeros_like(v));
    const auto next = sum.add(v);  // wraps modulo 2^64
    const auto overflow = sum.bitwise_xor(next).bitwise_and_(v.bitwise_xor(next)).lt(0);
    events.add_(overflow.sum());
    sum = at::where(overflow, at::where(v.gt(0), at::full_like(v, maxV), at::full_like(v, minV)), next);
  }
  const auto mean = sum.to(at::kDouble).mul_(std::ldexp(1.0, kNatMinExp)).div_(n).to(at::kFloat);
  const bool stochastic = !options_.deterministic;
  const auto rnd = generic::randomBits(ownerSeed, offset, len, mean.device());
  auto codes = encodeBits(mean, rnd, stochastic, &events);
  return at::cat({codes, events.reshape({1}).view(at::kByte)});
}

}  // namespace gradzip::compress
