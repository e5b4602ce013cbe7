// The randomized Hadamard transform's register helpers (THC §5.1), shared by
// compress/kernels/Hadamard.cpp, ThcKernels.cpp and THC's fused block kernels
// (compress/kernels/ThcBlock512.cpp): butterfly levels of the fast Walsh–Hadamard
// transform on data held in AVX-512 or AVX2 registers (element strides inside
// one register, register strides between registers of an array), and D's
// random signs for eight AVX2 lanes. A level maps (a, b) to (a + b, a − b) for
// every pair at its stride; any code that applies the levels in increasing
// stride order computes every output with the same float operations as the
// plain butterfly loops (tested bit for bit in tests/compress/kernels/HadamardTest.cpp
// and ThcTest.cpp). x86-64 with GCC or Clang only; callers check AVX-512 F (or
// AVX2 and FMA) at run time.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

namespace gradzip::compress::fwht {

// Strides 1, 2, 4 and 8 of one 16-float group in a register: each stride is
// one lane permutation p (swap neighbours, pairs, 128-bit quarters, 256-bit
// halves; in-lane shuffles for the first two, which are cheaper than a full
// permute) and r = v·(±1) + p, i.e. u + v in the lower and u − v in the upper
// lane of each pair. Multiplying by ±1 is exact and the FMA rounds once, so
// this equals the plain butterflies on those 16 floats bit for bit.
__attribute__((target("avx512f"), always_inline)) inline __m512 strides1to8(__m512 v) {
  const __m512 s1 = _mm512_set_ps(-1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1);
  const __m512 s2 = _mm512_set_ps(-1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1);
  const __m512 s4 = _mm512_set_ps(-1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1);
  const __m512 s8 = _mm512_set_ps(-1, -1, -1, -1, -1, -1, -1, -1, 1, 1, 1, 1, 1, 1, 1, 1);
  v = _mm512_fmadd_ps(v, s1, _mm512_permute_ps(v, 0xB1));            // lanes 1,0,3,2 of each quarter
  v = _mm512_fmadd_ps(v, s2, _mm512_permute_ps(v, 0x4E));            // lanes 2,3,0,1
  v = _mm512_fmadd_ps(v, s4, _mm512_shuffle_f32x4(v, v, 0xB1));      // quarters 1,0,3,2
  return _mm512_fmadd_ps(v, s8, _mm512_shuffle_f32x4(v, v, 0x4E));   // quarters 2,3,0,1
}

// Register strides 1, 2, .., N/2 over v[0, N) (N a power of two): element
// strides W·1 .. W·N/2 when v[r] holds floats W·r .. W·r + W − 1 of a group
// (W = 16 for __m512, 8 for __m256). + and − on these GCC vector types are
// the lane-wise vaddps / vsubps; having no target of its own, the function is
// compiled for the target of the kernel it is inlined into.
template <int N, class V>
__attribute__((always_inline)) inline void registerLevels(V* v) {
#pragma GCC unroll 8
  for (int h = 1; h < N; h *= 2)
#pragma GCC unroll 16
    for (int r = 0; r < N; r += 2 * h)
#pragma GCC unroll 16
      for (int j = r; j < r + h; ++j) {
        const V u = v[j], w = v[j + h];
        v[j] = u + w;
        v[j + h] = u - w;
      }
}

// strides1to8 for one 8-float group in an AVX2 register: strides 1 and 2 by
// in-lane shuffles, 4 by swapping the 128-bit halves; the same exact ±1 FMAs.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 strides1to4(__m256 v) {
  const __m256 s1 = _mm256_set_ps(-1, 1, -1, 1, -1, 1, -1, 1);
  const __m256 s2 = _mm256_set_ps(-1, -1, 1, 1, -1, -1, 1, 1);
  const __m256 s4 = _mm256_set_ps(-1, -1, -1, -1, 1, 1, 1, 1);
  v = _mm256_fmadd_ps(v, s1, _mm256_permute_ps(v, 0xB1));          // lanes 1,0,3,2 of each half
  v = _mm256_fmadd_ps(v, s2, _mm256_permute_ps(v, 0x4E));          // lanes 2,3,0,1
  return _mm256_fmadd_ps(v, s4, _mm256_permute2f128_ps(v, v, 0x01));  // halves swapped
}

// D's signs for the eight coordinates i .. i + 7 (i a multiple of 8) from
// their word `bits` (coordinate i's bit is bit i mod 64): lane l's bit moved to
// the sign position by a left shift of 31 − l, the rest zero; xor applies D.
__attribute__((target("avx2"), always_inline)) inline __m256 signs8(uint64_t bits, int64_t i) {
  const __m256i shifts = _mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24);
  const __m256i byte = _mm256_set1_epi32(static_cast<int>((bits >> (i & 63)) & 0xFF));
  return _mm256_castsi256_ps(
      _mm256_and_si256(_mm256_sllv_epi32(byte, shifts), _mm256_set1_epi32(static_cast<int>(0x80000000u))));
}

}  // namespace gradzip::compress::fwht
#endif
