// Implements compress/kernels/BitPackGeneric.h. Widths up to 8 bits go eight
// codes at a time: eight b-bit codes are b whole bytes, assembled in (or read
// from) one int64 word, LSB first; wider codes go through a stream of single
// bits (b bytes of temporaries per code, acceptable for the rare wide codes).
#include "compress/kernels/BitPackGeneric.h"

#include "compress/kernels/BitPack.h"
#include "util/Error.h"

namespace gradzip::compress::generic {
namespace {

at::Tensor shifts(int64_t count, int64_t step, const at::Device& device) {
  return at::arange(0, count * step, step, at::TensorOptions().dtype(at::kLong).device(device));
}

}  // namespace

at::Tensor packBits(const at::Tensor& codesIn, int bits, bool checked) {
  GZ_CHECK(bits >= 1 && bits <= 32, "packBits: bits must be in [1, 32], got {}", bits);
  GZ_CHECK(codesIn.dim() == 1 && !at::isFloatingType(codesIn.scalar_type()),
           "packBits: expected a 1-D integer tensor of codes");
  const auto device = codesIn.device();
  const int64_t n = codesIn.numel(), bytes = packedBytes(n, bits);
  auto codes = codesIn.to(at::kLong);
  if (checked && n > 0) {
    const bool bad = codes.lt(0).logical_or_(codes.ge(int64_t{1} << bits)).any().item<bool>();
    GZ_CHECK(!bad, "packBits: a code lies outside [0, 2^{})", bits);
  }
  codes = codes.bitwise_and((int64_t{1} << bits) - 1);
  if (bits <= 8) {
    const int64_t groups = (n + 7) / 8;
    auto padded = at::constant_pad_nd(codes, {0, groups * 8 - n}, 0).view({groups, 8});
    // Disjoint bit fields: their sum is their bitwise or (mod 2^64).
    auto words = padded.bitwise_left_shift(shifts(8, bits, device)).sum(1);
    auto out = words.unsqueeze(1).bitwise_right_shift(shifts(bits, 8, device)).bitwise_and_(0xFF);
    return out.reshape({-1}).narrow(0, 0, bytes).to(at::kByte);
  }
  auto bitStream = codes.unsqueeze(1).bitwise_right_shift(shifts(bits, 1, device)).bitwise_and_(1).reshape({-1});
  bitStream = at::constant_pad_nd(bitStream, {0, bytes * 8 - n * bits}, 0).view({bytes, 8});
  return bitStream.bitwise_left_shift(shifts(8, 1, device)).sum(1).to(at::kByte);
}

at::Tensor unpackBits(const at::Tensor& packed, int bits, int64_t n, at::ScalarType out) {
  GZ_CHECK(bits >= 1 && bits <= 32, "unpackBits: bits must be in [1, 32], got {}", bits);
  GZ_CHECK(packed.scalar_type() == at::kByte && packed.dim() == 1, "unpackBits: expected a 1-D uint8 tensor");
  GZ_CHECK(packed.numel() >= packedBytes(n, bits), "unpackBits: {} bytes cannot hold {} codes of {} bits",
           packed.numel(), n, bits);
  const int maxBits = out == at::kByte ? 8 : out == at::kShort ? 15 : out == at::kInt ? 31 : out == at::kLong ? 64 : 0;
  GZ_CHECK(maxBits > 0, "unpackBits: unsupported output dtype {}", c10::toString(out));
  GZ_CHECK(bits <= maxBits, "unpackBits: {} cannot hold {}-bit codes", c10::toString(out), bits);
  const auto device = packed.device();
  const int64_t bytes = packedBytes(n, bits);
  auto in = packed.narrow(0, 0, bytes).to(at::kLong);
  if (bits <= 8) {
    const int64_t groups = (n + 7) / 8;
    auto padded = at::constant_pad_nd(in, {0, groups * bits - bytes}, 0).view({groups, bits});
    auto words = padded.bitwise_left_shift(shifts(bits, 8, device)).sum(1);
    auto codes = words.unsqueeze(1).bitwise_right_shift(shifts(8, bits, device)).bitwise_and_((1 << bits) - 1);
    return codes.reshape({-1}).narrow(0, 0, n).to(out);
  }
  auto bitStream = in.unsqueeze(1).bitwise_right_shift(shifts(8, 1, device)).bitwise_and_(1).reshape({-1});
  auto codeBits = bitStream.narrow(0, 0, n * bits).view({n, bits});
  return codeBits.bitwise_left_shift(shifts(bits, 1, device)).sum(1).to(out);
}

}  // namespace gradzip::compress::generic
