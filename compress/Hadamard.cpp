// Implements compress/Hadamard.h. The butterflies run block-local first (a
// cache-sized tile finishes all its small strides before the next tile), then
// the large strides sweep the whole vector; both loops vectorise.
#include "compress/Hadamard.h"

#include "compress/CounterRng.h"
#include "util/Error.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

namespace gradzip::compress {
namespace {

constexpr int64_t kTile = 4096;  // 16 KiB of floats: stays in L1/L2 for the small strides

// Butterflies with strides h in [hFrom, hTo) over x[0, n).
void butterflies(float* x, int64_t n, int64_t hFrom, int64_t hTo) {
  for (int64_t h = hFrom; h < hTo; h *= 2) {
    for (int64_t i = 0; i < n; i += 2 * h) {
      float* a = x + i;
      float* b = x + i + h;
      for (int64_t j = 0; j < h; ++j) {
        const float u = a[j], v = b[j];
        a[j] = u + v;
        b[j] = u - v;
      }
    }
  }
}

int64_t nextPow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

void fwhtInPlace(float* x, int64_t n, int64_t block) {
  GZ_ASSERT(block > 0 && (block & (block - 1)) == 0 && n % block == 0, "fwht: bad block {} for n {}", block, n);
  const int64_t tile = std::min(block, kTile);
  at::parallel_for(0, n / tile, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) butterflies(x + t * tile, tile, 1, tile);
  });
  if (block > tile) {
    at::parallel_for(0, n / block, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) butterflies(x + t * block, block, tile, block);
    });
  }
}

RandomizedHadamard::RandomizedHadamard(int64_t d, int blockLog2) : d_(d) {
  GZ_CHECK(d > 0, "RandomizedHadamard: dimension must be positive, got {}", d);
  GZ_CHECK(blockLog2 >= 0 && blockLog2 <= 40, "RandomizedHadamard: block log2 must be in [0, 40], got {}", blockLog2);
  const int64_t full = nextPow2(std::max<int64_t>(d, 8));
  if (blockLog2 == 0 || (int64_t{1} << blockLog2) >= full) {
    block_ = full;
    padded_ = full;
  } else {
    block_ = std::max<int64_t>(int64_t{1} << blockLog2, 8);
    padded_ = (d + block_ - 1) / block_ * block_;
  }
}

void RandomizedHadamard::applySigns(float* v, uint64_t seed) const {
  // D: coordinate i is negated iff bit (i mod 64) of word i/64 of the stream is set.
  at::parallel_for(0, (padded_ + 63) / 64, 256, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      const uint64_t bits = randomBits(seed, static_cast<uint64_t>(w));
      const int64_t end = std::min<int64_t>(padded_, (w + 1) * 64);
      for (int64_t i = w * 64; i < end; ++i)
        if ((bits >> (i & 63)) & 1) v[i] = -v[i];
    }
  });
}

at::Tensor RandomizedHadamard::forward(const at::Tensor& x, uint64_t sharedSeed) const {
  GZ_CHECK(x.dim() == 1 && x.numel() == d_ && x.scalar_type() == at::kFloat,
           "RandomizedHadamard::forward: expected float32 [{}], got {} elements", d_, x.numel());
  auto out = at::zeros({padded_}, at::kFloat);
  out.narrow(0, 0, d_).copy_(x);
  float* v = out.data_ptr<float>();
  applySigns(v, sharedSeed);
  fwhtInPlace(v, padded_, block_);
  out.mul_(1.0 / std::sqrt(static_cast<double>(block_)));  // orthonormal H = H_unnormalised / sqrt(B)
  return out;
}

at::Tensor RandomizedHadamard::inverse(const at::Tensor& y, uint64_t sharedSeed) const {
  GZ_CHECK(y.dim() == 1 && y.numel() == padded_ && y.scalar_type() == at::kFloat,
           "RandomizedHadamard::inverse: expected float32 [{}], got {} elements", padded_, y.numel());
  auto out = y.cpu().contiguous().clone();
  float* v = out.data_ptr<float>();
  fwhtInPlace(v, padded_, block_);
  out.mul_(1.0 / std::sqrt(static_cast<double>(block_)));
  applySigns(v, sharedSeed);
  return out.narrow(0, 0, d_).clone();
}

}  // namespace gradzip::compress
