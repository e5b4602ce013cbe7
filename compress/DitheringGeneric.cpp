// The device-generic codec of compress/Dithering.h (compress/CodecPath.h): the
// same message, byte for byte, as the CPU loop in Dithering.cpp, written in
// ATen operations on x's device. The noise is the same counter stream
// (compress/kernels/CounterRngGeneric.h draws uniform01(seed, i) exactly) and
// every float operation of the rounding decision and of the decoder is the
// CPU loop's, in the same order, so QSGD and natural dithering give the same
// bits on both paths.
#include "compress/Dithering.h"

#include "compress/kernels/BitPack.h"
#include "compress/kernels/BitPackGeneric.h"
#include "compress/kernels/CounterRngGeneric.h"
#include "util/Error.h"

#include <algorithm>

namespace gradzip::compress {

at::Tensor Dithering::levelsOn(const at::Device& device) const {
  return at::tensor(levels_, at::TensorOptions().dtype(at::kFloat)).to(device);
}

at::Tensor Dithering::encodeMessageGeneric(const at::Tensor& xIn, uint64_t seed) const {
  const auto x = xIn.contiguous();
  const int64_t d = x.numel(), bucket = std::max<int64_t>(bucketLength(d), 1);
  const int s = static_cast<int>(levels_.size()) - 1;
  const auto norms = bucketNorms(x);
  const auto lv = levelsOn(x.device());
  // y = min(|x_i| / norm, 1), or 0 in a bucket whose norm is 0.
  const auto norm = norms.repeat_interleave(bucket).narrow(0, 0, d);
  const auto y = at::where(norm.gt(0), x.abs().div(norm).clamp_max_(1.0f), at::zeros_like(x));
  // The interval [lv[j], lv[j+1]] containing y (Definition 3): upper_bound − 1.
  const auto j = at::searchsorted(lv, y, /*out_int32=*/false, /*right=*/true).sub_(1).clamp_(0, s - 1);
  const auto lo = lv.index_select(0, j), hi = lv.index_select(0, j + 1);
  const auto u = generic::uniform01(seed, 0, d, x.device());
  const auto up = u.mul(hi - lo).lt(y - lo);
  // Sign bit above the level index.
  const auto codes = (j + up.to(at::kLong)).bitwise_or_(at::signbit(x).to(at::kLong).bitwise_left_shift(indexBits_));
  const auto packed = generic::packBits(codes, codeBits_, /*checked=*/false);
  // The header: each norm's four little-endian bytes, as the CPU path copies them.
  return at::cat({norms.contiguous().view(at::kByte), packed});
}

at::Tensor Dithering::decodeMessageGeneric(const at::Tensor& msgIn, int64_t d) const {
  const auto msg = msgIn.contiguous();
  GZ_CHECK(msg.scalar_type() == at::kByte && msg.dim() == 1 && msg.numel() == messageBytes(d),
           "{}: malformed payload for d = {}", name_, d);
  const int64_t bucket = std::max<int64_t>(bucketLength(d), 1);
  const int64_t header = messageBytes(d) - packedBytes(d, codeBits_);
  const int s = static_cast<int>(levels_.size()) - 1;
  const auto norms = msg.narrow(0, 0, header).clone().view(at::kFloat);
  const auto codes = generic::unpackBits(msg.narrow(0, header, msg.numel() - header), codeBits_, d, at::kLong);
  const auto level = codes.bitwise_and((int64_t{1} << indexBits_) - 1).clamp_max_(s);
  const auto v = norms.repeat_interleave(bucket).narrow(0, 0, d).mul(levelsOn(msg.device()).index_select(0, level));
  return at::where(codes.bitwise_right_shift(indexBits_).ne(0), v.neg(), v);
}

}  // namespace gradzip::compress
