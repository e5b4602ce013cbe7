// splitmix64's finaliser (compress/kernels/CounterRng.h mix64) on eight 64-bit lanes of
// an AVX-512 register (AVX-512 DQ's vpmullq forms the products), for the
// AVX-512 kernels that draw per-coordinate noise or sign words in bulk
// (compress/kernels/SimdKernels.cpp, NaturalEncoder512.cpp, ThcBlock512.cpp); the
// AVX2 counterpart is compress/kernels/Splitmix256.h. Callers hold the states
// seed + (w + 1)·γ of words w (states8) and advance them by multiples of γ
// (advance), so the words equal randomBits(seed, w) bit for bit. x86-64 with GCC or Clang only;
// callers check AVX-512 at run time (simd::level()).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "compress/kernels/CounterRng.h"

#include <cstdint>

namespace gradzip::compress::splitmix512 {

// The splitmix64 states of words w .. w+7 of stream `seed`, lane l holding
// seed + (w + l + 1)·γ: one broadcast and one add of constant lane offsets.
__attribute__((target("avx512f"), always_inline)) inline __m512i states8(uint64_t seed, uint64_t w) {
  constexpr auto g = [](long long l) { return static_cast<long long>(static_cast<uint64_t>(l) * kSplitmixGamma); };
  return _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(seed + (w + 1) * kSplitmixGamma)),
                          _mm512_set_epi64(g(7), g(6), g(5), g(4), g(3), g(2), g(1), 0));
}

// Added to a state to move it on by `words` words.
__attribute__((target("avx512f"), always_inline)) inline __m512i advance(uint64_t words) {
  return _mm512_set1_epi64(static_cast<long long>(words * kSplitmixGamma));
}

// mix64 of each lane's state z, before its last xor-shift: z' with
// mix64 = z' ^ (z' >> 31) (a caller may fold that xor into other logic).
__attribute__((target("avx512f,avx512dq"), always_inline)) inline __m512i multiply8(__m512i z) {
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(kSplitmixMul1));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(kSplitmixMul2));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
  return _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
}

// mix64 of each lane's state z.
__attribute__((target("avx512f,avx512dq"), always_inline)) inline __m512i finalise8(__m512i z) {
  z = multiply8(z);
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

}  // namespace gradzip::compress::splitmix512
#endif
