// Implements compress/kernels/CounterRngGeneric.h with elementwise int64 ATen
// operations (in place where a temporary can be reused).
#include "compress/kernels/CounterRngGeneric.h"

#include "compress/kernels/CounterRng.h"
#include "util/Error.h"

namespace gradzip::compress::generic {
namespace {

int64_t asSigned(uint64_t v) { return static_cast<int64_t>(v); }

// z ^= z >>> k, in place.
void xorShiftInPlace(at::Tensor& z, int k) { z.bitwise_xor_(shiftRightLogical(z, k)); }

// z = mix64(z), in place.
void mixInPlace(at::Tensor& z) {
  xorShiftInPlace(z, 30);
  z.mul_(asSigned(kSplitmixMul1));
  xorShiftInPlace(z, 27);
  z.mul_(asSigned(kSplitmixMul2));
  xorShiftInPlace(z, 31);
}

}  // namespace

at::Tensor shiftRightLogical(const at::Tensor& x, int k) {
  GZ_CHECK(k > 0 && k < 64, "shiftRightLogical: shift must be in (0, 64), got {}", k);
  // Arithmetic shift, then clear the k copies of the sign bit.
  return x.bitwise_right_shift(k).bitwise_and_(asSigned((~uint64_t{0}) >> k));
}

at::Tensor mix64(const at::Tensor& states) {
  GZ_CHECK(states.scalar_type() == at::kLong, "mix64: expected int64 states");
  auto z = states.clone();
  mixInPlace(z);
  return z;
}

at::Tensor randomBitsAt(uint64_t seed, const at::Tensor& counters) {
  GZ_CHECK(counters.scalar_type() == at::kLong, "randomBitsAt: expected int64 counters");
  // state_i = seed + (i + 1)·γ = (seed + γ) + i·γ (mod 2^64).
  auto z = counters.mul(asSigned(kSplitmixGamma)).add_(asSigned(seed + kSplitmixGamma));
  mixInPlace(z);
  return z;
}

at::Tensor randomBits(uint64_t seed, int64_t offset, int64_t count, at::Device device) {
  GZ_CHECK(count >= 0 && offset >= 0, "randomBits: bad range [{}, {} + {})", offset, offset, count);
  return randomBitsAt(seed, at::arange(offset, offset + count, at::TensorOptions().dtype(at::kLong).device(device)));
}

at::Tensor uniform01(uint64_t seed, int64_t offset, int64_t count, at::Device device) {
  return shiftRightLogical(randomBits(seed, offset, count, device), 40).to(at::kFloat).mul_(1.0f / 16777216.0f);
}

at::Tensor randomHalf(uint64_t seed, int64_t offset, int64_t count, at::Device device) {
  GZ_CHECK(count >= 0 && offset >= 0, "randomHalf: bad range [{}, {} + {})", offset, offset, count);
  const auto opts = at::TensorOptions().dtype(at::kLong).device(device);
  if (count == 0) return at::empty({0}, opts);
  const int64_t first = offset / 2, last = (offset + count - 1) / 2;
  const auto words = randomBits(seed, first, last - first + 1, device);
  // Halves in counter order: word w's low half is counter 2w, its high half 2w + 1.
  const auto halves = at::stack({words.bitwise_and(asSigned(0xFFFFFFFFULL)), shiftRightLogical(words, 32)}, 1);
  return halves.reshape({-1}).narrow(0, offset - 2 * first, count).contiguous();
}

at::Tensor uniform01Half(uint64_t seed, int64_t offset, int64_t count, at::Device device) {
  return randomHalf(seed, offset, count, device).bitwise_right_shift_(8).to(at::kFloat).mul_(1.0f / 16777216.0f);
}

}  // namespace gradzip::compress::generic
