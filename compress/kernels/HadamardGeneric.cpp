// Implements compress/kernels/HadamardGeneric.h. The butterflies of one level
// pair coordinate j with j + h inside every 2h-group; viewing the vector as
// [groups, 2, h] makes the two halves slices, and a stack writes the sums and
// differences back in place of them. Each level reads the previous one's
// result, as Hadamard.cpp's loops do, and rounds the same two float
// operations per pair.
#include "compress/kernels/HadamardGeneric.h"

#include "compress/kernels/CounterRngGeneric.h"
#include "util/Error.h"

#include <cmath>

namespace gradzip::compress::generic {

at::Tensor randomSigns(int64_t n, uint64_t seed, at::Device device) {
  const int64_t words = (n + 63) / 64;
  const at::Tensor w = randomBits(seed, 0, words, device);
  const at::Tensor shifts = at::arange(64, at::TensorOptions().dtype(at::kLong).device(device));
  // Arithmetic shifts are fine here: only bit 0 of each result is kept.
  const at::Tensor bits = at::bitwise_and(at::bitwise_right_shift(w.unsqueeze(1), shifts), 1).view({-1});
  return bits.narrow(0, 0, n).to(at::kFloat).mul_(-2.0).add_(1.0);
}

at::Tensor fwht(const at::Tensor& x, int64_t block) {
  GZ_ASSERT(x.dim() == 1 && block > 0 && (block & (block - 1)) == 0 && x.numel() % block == 0,
            "generic fwht: bad block {} for n {}", block, x.numel());
  const int64_t n = x.numel();
  at::Tensor v = x.contiguous();
  for (int64_t h = 1; h < block; h *= 2) {
    const at::Tensor pairs = v.view({n / (2 * h), 2, h});
    const at::Tensor a = pairs.select(1, 0), b = pairs.select(1, 1);
    v = at::stack({a + b, a - b}, 1).view({n});
  }
  return block == 1 ? v.clone() : v;
}

at::Tensor rhtForward(const RandomizedHadamard& rht, const at::Tensor& x, uint64_t sharedSeed) {
  GZ_CHECK(x.dim() == 1 && x.numel() == rht.dim() && x.scalar_type() == at::kFloat,
           "generic RHT forward: expected float32 [{}], got {} elements", rht.dim(), x.numel());
  at::Tensor v = at::zeros({rht.paddedDim()}, x.options());
  v.narrow(0, 0, rht.dim()).copy_(x);
  // D on the padding too: its zeros take D's flips (-0.0), as forwardUnscaled's do.
  v.mul_(randomSigns(rht.paddedDim(), sharedSeed, x.device()));
  // The orthonormal scale as RandomizedHadamard::forward applies it (a float product).
  return fwht(v, rht.blockSize()).mul_(1.0 / std::sqrt(static_cast<double>(rht.blockSize())));
}

at::Tensor rhtInverse(const RandomizedHadamard& rht, const at::Tensor& y, uint64_t sharedSeed) {
  GZ_CHECK(y.dim() == 1 && y.numel() == rht.paddedDim() && y.scalar_type() == at::kFloat,
           "generic RHT inverse: expected float32 [{}], got {} elements", rht.paddedDim(), y.numel());
  const at::Tensor v = fwht(y, rht.blockSize()).narrow(0, 0, rht.dim());
  // inverseInPlace: the float scale first, then D's sign flips.
  return v.mul(static_cast<double>(rht.scale())).mul_(randomSigns(rht.dim(), sharedSeed, y.device()));
}

}  // namespace gradzip::compress::generic
