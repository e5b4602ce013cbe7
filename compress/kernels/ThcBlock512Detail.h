// Internals shared by the two files of THC's AVX-512 block kernels
// (compress/kernels/ThcBlock512.cpp: the forward direction; ThcBlock512Inverse.cpp: the
// inverse): the target attribute and the sign and lane-mask helpers. x86-64
// with GCC or Clang only; callers check the CPU (block512::supports).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

#define GZ_THC512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx512vbmi")))

namespace gradzip::compress::thc::block512::detail {

// v with the lanes in `neg` negated (D: a sign flip is exact).
GZ_THC512 inline __m512 flip(__m512 v, __mmask16 neg) {
  const __m512i s = _mm512_castps_si512(v);
  return _mm512_castsi512_ps(_mm512_mask_xor_epi32(s, neg, s, _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}

// D's bits for local coordinates k .. k + 15 (k a multiple of 16).
inline __mmask16 signMask(const uint64_t* signs, int64_t k) { return static_cast<__mmask16>(signs[k / 64] >> (k & 63)); }

// Lanes [0, left) of a 16-lane step (all when left >= 16, none when <= 0).
inline __mmask16 firstLanes(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : left <= 0 ? 0 : static_cast<__mmask16>((1u << left) - 1);
}

}  // namespace gradzip::compress::thc::block512::detail
#endif
