// splitmix64 (compress/kernels/CounterRng.h) on four 64-bit lanes of an AVX2 register,
// for the AVX2 kernels that draw per-coordinate noise or sign words in bulk
// (compress/kernels/SimdKernels.cpp, NaturalEncoder256.cpp, Hadamard.cpp). AVX2 has no
// 64-bit multiply (AVX-512 DQ's vpmullq), so the finaliser's two products are
// formed from three 32x32->64-bit vpmuludq each: lo(a)·lo(c) + ((hi(a)·lo(c) +
// lo(a)·hi(c)) << 32), which is a·c mod 2^64 exactly. The words equal
// randomBits(seed, w) bit for bit; the 8 x 32-bit view of words w..w+3 is the
// halves randomHalf(seed, 2w .. 2w+7) in order. x86-64 with GCC or Clang only;
// callers check AVX2 at run time (simd::level()).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "compress/kernels/CounterRng.h"

#include <cstdint>

namespace gradzip::compress::splitmix256 {

#define GZ_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

// a·c mod 2^64 per 64-bit lane, for a constant c given with its high half
// cHi = c >> 32 (in the low 32 bits of each lane) precomputed.
GZ_AVX2_INLINE __m256i mulConst(__m256i a, __m256i c, __m256i cHi) {
  const __m256i lolo = _mm256_mul_epu32(a, c);
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c), _mm256_mul_epu32(a, cHi));
  return _mm256_add_epi64(lolo, _mm256_slli_epi64(cross, 32));
}

// mix64 (CounterRng.h) of each lane's state z.
GZ_AVX2_INLINE __m256i finalise4(__m256i z) {
  const __m256i c1 = _mm256_set1_epi64x(static_cast<long long>(kSplitmixMul1));
  const __m256i c1Hi = _mm256_set1_epi64x(static_cast<long long>(kSplitmixMul1 >> 32));
  const __m256i c2 = _mm256_set1_epi64x(static_cast<long long>(kSplitmixMul2));
  const __m256i c2Hi = _mm256_set1_epi64x(static_cast<long long>(kSplitmixMul2 >> 32));
  z = mulConst(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), c1, c1Hi);
  z = mulConst(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), c2, c2Hi);
  return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

// The splitmix64 states of words w .. w+3 of stream `seed`: seed + (w + l + 1)·γ.
GZ_AVX2_INLINE __m256i states(uint64_t seed, uint64_t w) {
  auto state = [&](uint64_t k) { return static_cast<long long>(seed + (w + k) * kSplitmixGamma); };
  return _mm256_set_epi64x(state(4), state(3), state(2), state(1));
}

// Added to states() to move on by four words.
GZ_AVX2_INLINE __m256i step4() { return _mm256_set1_epi64x(static_cast<long long>(4 * kSplitmixGamma)); }

}  // namespace gradzip::compress::splitmix256
#endif
