// Implements compress/kernels/Hadamard.h. The butterflies run block-local first (a
// cache-sized tile finishes all its small strides before the next tile), then
// the large strides sweep the whole vector, four, three or two levels a sweep
// on register columns where the CPU has AVX2 or AVX-512; all loops vectorise.
#include "compress/kernels/Hadamard.h"

#include "compress/kernels/CounterRng.h"
#include "compress/kernels/FwhtRegisters.h"
#include "compress/kernels/SimdKernels.h"
#include "util/Error.h"

#include <ATen/Parallel.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gradzip::compress {
namespace {

constexpr int64_t kTile = 4096;  // 16 KiB of floats: stays in L1/L2 for the small strides

// Butterflies with strides h in [hFrom, hTo) over x[0, n); compiled for
// AVX-512, AVX2 and baseline x86-64 (the inner loop vectorises for h >= 16).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
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

#if defined(__x86_64__) && defined(__GNUC__)
using fwht::strides1to8;

// Strides 1 .. 8 of every 16-float group of x[0, n).
__attribute__((target("avx512f"))) void smallStrides512(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) _mm512_storeu_ps(x + i, strides1to8(_mm512_loadu_ps(x + i)));
}

// Strides 1 to 128 of every 256-float group with the group in 16 registers:
// strides below 16 inside each register (as smallStrides512), then 16..128
// between registers. Each 256-group is independent of the others for these
// strides, so this equals butterflies(x, n, 1, 256) bit for bit.
__attribute__((target("avx512f"))) void strides256(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 256) {
    // Fully unrolled (constant indices), so v stays in registers.
    __m512 v[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) v[r] = strides1to8(_mm512_loadu_ps(x + i + 16 * r));
    fwht::registerLevels<16>(v);  // element strides 16 .. 128
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) _mm512_storeu_ps(x + i + 16 * r, v[r]);
  }
}

// strides256 with AVX2: strides 1 to 32 of every 64-float group in 8
// registers, the same operations in the same order (so the same bits).
__attribute__((target("avx2,fma"))) void strides64(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 64) {
    __m256 v[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) v[r] = fwht::strides1to4(_mm256_loadu_ps(x + i + 8 * r));
    fwht::registerLevels<8>(v);  // element strides 8 .. 32
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) _mm256_storeu_ps(x + i + 8 * r, v[r]);
  }
}

// Strides 64, 128 and 256 of every 512-float group: per 8-float column c of
// the group, the eight registers at c + 64r run registerLevels (register
// stride h is element stride 64h), so the group is read and written once for
// three levels; each pair sees the same operations in the same order as the
// plain loops.
__attribute__((target("avx2,fma"))) void columns512(float* x, int64_t n) {
  for (int64_t g = 0; g < n; g += 512)
    for (int64_t c = 0; c < 64; c += 8) {
      __m256 v[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) v[r] = _mm256_loadu_ps(x + g + c + 64 * r);
      fwht::registerLevels<8>(v);
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) _mm256_storeu_ps(x + g + c + 64 * r, v[r]);
    }
}

// log2(N) levels, strides h .. h·N/2 (h a multiple of the register's W
// floats), of every N·h-float group of x[0, n) in one pass: per W-float
// column c of a group, the N registers at c + h·r run registerLevels<N>
// (register stride s is element stride h·s). Each pair sees the same
// operations in the same order as in `butterflies`, so the result is the same
// bits, from a third or a quarter of the passes over a vector too large for
// the cache. Like registerLevels it has no target of its own: the wrappers
// below compile it for AVX-512 (V = __m512) and AVX2 (__m256).
template <int N, class V>
__attribute__((always_inline)) inline void registerColumns(float* x, int64_t n, int64_t h) {
  constexpr int64_t W = sizeof(V) / sizeof(float);
  for (int64_t g = 0; g < n; g += N * h)
    for (int64_t c = 0; c < h; c += W) {
      V v[N];
#pragma GCC unroll 16
      for (int r = 0; r < N; ++r) std::memcpy(&v[r], x + g + c + h * r, sizeof(V));
      fwht::registerLevels<N>(v);
#pragma GCC unroll 16
      for (int r = 0; r < N; ++r) std::memcpy(x + g + c + h * r, &v[r], sizeof(V));
    }
}

template <int N>
__attribute__((target("avx512f"))) void registerColumns512(float* x, int64_t n, int64_t h) {
  registerColumns<N, __m512>(x, n, h);
}

template <int N>
__attribute__((target("avx2,fma"))) void registerColumns256(float* x, int64_t n, int64_t h) {
  registerColumns<N, __m256>(x, n, h);
}

// Strides 1 .. 4 of every 8-float group of x[0, n).
__attribute__((target("avx2,fma"))) void smallStrides256(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(x + i, fwht::strides1to4(_mm256_loadu_ps(x + i)));
}
#endif

// Strides [from, to) of x[0, n) (n a multiple of `to`; from a power of two
// >= 16): several levels per pass where the CPU has AVX2 or AVX-512 (four,
// else three, else two), the plain loop elsewhere.
void largeStrides(float* x, int64_t n, int64_t from, int64_t to) {
  int64_t h = from;
#if defined(__x86_64__) && defined(__GNUC__)
  if (simd::haveAvx512()) {
    for (; h * 2 < to; h *= (h * 16 <= to ? 16 : h * 8 <= to ? 8 : 4)) {
      if (h * 16 <= to) registerColumns512<16>(x, n, h);
      else if (h * 8 <= to) registerColumns512<8>(x, n, h);
      else registerColumns512<4>(x, n, h);
    }
  } else if (simd::haveAvx2()) {
    for (; h * 2 < to; h *= (h * 8 <= to ? 8 : 4)) {
      if (h * 8 <= to) registerColumns256<8>(x, n, h);
      else registerColumns256<4>(x, n, h);
    }
  }
#endif
  if (h < to) butterflies(x, n, h, to);
}

// All strides in [1, tile) of x[0, n) (n a multiple of tile).
void tileButterflies(float* x, int64_t n, int64_t tile) {
#if defined(__x86_64__) && defined(__GNUC__)
  const bool avx512 = simd::haveAvx512(), avx2 = simd::haveAvx2();
  int64_t done = 1;  // strides below `done` are finished
  if (tile >= 256 && avx512) {
    strides256(x, n);
    done = 256;
  } else if (tile >= 16 && avx512) {
    smallStrides512(x, n);
    done = 16;
  } else if (tile >= 512 && avx2) {
    strides64(x, n);
    columns512(x, n);
    done = 512;
  } else if (tile >= 64 && avx2) {
    strides64(x, n);
    done = 64;
  } else if (tile >= 8 && avx2) {
    smallStrides256(x, n);
    done = 8;
  }
  if (done > 1) {
    for (int64_t t = 0; t < n; t += tile) largeStrides(x + t, tile, done, tile);
    return;
  }
#endif
  for (int64_t t = 0; t < n; t += tile) butterflies(x + t, tile, 1, tile);
}

int64_t nextPow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// applyRandomSigns, one coordinate at a time.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void signsLoop(const float* in, int64_t lo, int64_t hi, uint64_t seed, float scale, float* out) {
  for (int64_t w = lo / 64; w * 64 < hi; ++w) {
    const uint64_t bits = randomBits(seed, static_cast<uint64_t>(w));
    const int64_t b = std::max(lo, w * 64), e = std::min(hi, (w + 1) * 64);
    for (int64_t i = b; i < e; ++i) {
      uint32_t u;
      const float v = scale == 1.0f ? in[i - lo] : in[i - lo] * scale;
      std::memcpy(&u, &v, 4);
      u ^= static_cast<uint32_t>((bits >> (i & 63)) & 1) << 31;
      std::memcpy(out + (i - lo), &u, 4);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// applyRandomSigns with AVX2 on coordinates [lo, hi), both multiples of 8,
// eight signs per step from one byte of the word (fwht::signs8).
__attribute__((target("avx2"))) void signs256(const float* in, int64_t lo, int64_t hi, uint64_t seed, float scale,
                                              float* out) {
  const __m256 scaleV = _mm256_set1_ps(scale);
  uint64_t bits = randomBits(seed, static_cast<uint64_t>(lo / 64));
  for (int64_t i = lo; i < hi; i += 8) {
    if (i % 64 == 0) bits = randomBits(seed, static_cast<uint64_t>(i / 64));
    __m256 v = _mm256_loadu_ps(in + (i - lo));
    if (scale != 1.0f) v = _mm256_mul_ps(v, scaleV);
    _mm256_storeu_ps(out + (i - lo), _mm256_xor_ps(v, fwht::signs8(bits, i)));
  }
}
#endif

}  // namespace

void applyRandomSigns(const float* in, int64_t lo, int64_t hi, uint64_t seed, float* out, float scale) {
#if defined(__x86_64__) && defined(__GNUC__)
  const int64_t a = std::min(hi, (lo + 7) / 8 * 8), b = std::max(a, hi / 8 * 8);
  if (simd::haveAvx2() && b - a >= 64) {
    signsLoop(in, lo, a, seed, scale, out);
    signs256(in + (a - lo), a, b, seed, scale, out + (a - lo));
    signsLoop(in + (b - lo), b, hi, seed, scale, out + (b - lo));
    return;
  }
#endif
  signsLoop(in, lo, hi, seed, scale, out);
}

void fwhtInPlace(float* x, int64_t n, int64_t block) {
  GZ_ASSERT(block > 0 && (block & (block - 1)) == 0 && n % block == 0, "fwht: bad block {} for n {}", block, n);
  const int64_t tile = std::min(block, kTile);
  at::parallel_for(0, n / tile, 1, [&](int64_t b, int64_t e) { tileButterflies(x + b * tile, (e - b) * tile, tile); });
  if (block > tile) {
    at::parallel_for(0, n / block, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) largeStrides(x + t * block, block, tile, block);
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

void RandomizedHadamard::forwardUnscaled(const float* src, uint64_t sharedSeed, float* v) const {
  // D·pad(x) in one pass: x copied with its signs, then the zero padding, whose
  // zeros take D's flips too.
  at::parallel_for(0, (padded_ + 63) / 64, 256, [&](int64_t b, int64_t e) {
    const int64_t lo = b * 64, hi = std::min(padded_, e * 64), mid = std::clamp(d_, lo, hi);
    applyRandomSigns(src + lo, lo, mid, sharedSeed, v + lo);
    std::fill(v + mid, v + hi, 0.0f);
    applyRandomSigns(v + mid, mid, hi, sharedSeed, v + mid);
  });
  fwhtInPlace(v, padded_, block_);
}

at::Tensor RandomizedHadamard::forward(const at::Tensor& x, uint64_t sharedSeed) const {
  GZ_CHECK(x.dim() == 1 && x.numel() == d_ && x.scalar_type() == at::kFloat,
           "RandomizedHadamard::forward: expected float32 [{}], got {} elements", d_, x.numel());
  const auto xc = x.cpu().contiguous();
  auto out = at::empty({padded_}, at::kFloat);
  forwardUnscaled(xc.data_ptr<float>(), sharedSeed, out.data_ptr<float>());
  out.mul_(1.0 / std::sqrt(static_cast<double>(block_)));  // orthonormal H = H_unnormalised / sqrt(B)
  return out;
}

void RandomizedHadamard::inverseInPlace(float* v, uint64_t sharedSeed, float* o) const {
  fwhtInPlace(v, padded_, block_);
  // The orthonormal scale and D on the first d coordinates, in one pass into the result
  // (the same float products as a mul_ over the whole vector, then the sign flips).
  const float scale = this->scale();
  at::parallel_for(0, (d_ + 63) / 64, 256, [&](int64_t b, int64_t e) {
    const int64_t lo = b * 64, hi = std::min(d_, e * 64);
    applyRandomSigns(v + lo, lo, hi, sharedSeed, o + lo, scale);
  });
}

at::Tensor RandomizedHadamard::inverse(const at::Tensor& y, uint64_t sharedSeed) const {
  GZ_CHECK(y.dim() == 1 && y.numel() == padded_ && y.scalar_type() == at::kFloat,
           "RandomizedHadamard::inverse: expected float32 [{}], got {} elements", padded_, y.numel());
  auto work = y.cpu().contiguous().clone();
  auto out = at::empty({d_}, at::kFloat);
  inverseInPlace(work.data_ptr<float>(), sharedSeed, out.data_ptr<float>());
  return out;
}

}  // namespace gradzip::compress
