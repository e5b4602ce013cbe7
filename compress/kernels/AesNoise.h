// Counter-based noise for natural compression's stochastic rounding, 128 bits
// at a time: block b of stream `seed` is two AES rounds (FIPS-197 §5.1, in the
// order of x86's AESENC: ShiftRows, SubBytes, MixColumns, then the round key)
// applied to the splitmix64 states of words 2b and 2b + 1 (compress/kernels/CounterRng.h:
// seed + (w + 1)·γ, the low and high 64 bits). Coordinate i takes 32-bit word
// i mod 4 of block i / 4. Why not splitmix64's finaliser, as the other
// compressors draw: C_nat needs 23 random bits a coordinate, and the
// finaliser's two 64-bit multiplies (per 2 coordinates) dominate the in-cache
// codec, while two VAES rounds give 16 coordinates' noise in two
// instructions. Two rounds, because one fails PractRand and two pass it, also
// reseeded as training reseeds per step and bucket (the notes and timings in
// experiments/results/compressors_avx512_aes.md). The keys are fixed digits of π;
// the seed enters through the states. Every path draws the same bits:
// block() here (AES-NI when the CPU has it, else aesencTable), and the
// AVX-512 (VAES) and AVX2 (AES-NI) helpers below, tested against each other in
// tests/compress/kernels/AesNoiseTest.cpp.
#pragma once

#include "compress/kernels/CounterRng.h"

#include <array>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace gradzip::compress::aesnoise {

// Round keys: the first 32 hexadecimal digits of π's fraction, low word first.
constexpr uint64_t kKey1Lo = 0x13198A2E03707344ULL, kKey1Hi = 0x243F6A8885A308D3ULL;
constexpr uint64_t kKey2Lo = 0x082EFA98EC4E6C89ULL, kKey2Hi = 0xA4093822299F31D0ULL;

// A 128-bit block as two 64-bit halves (byte j of the block is byte j % 8 of
// lo for j < 8, of hi otherwise: x86's little-endian order).
struct Block {
  uint64_t lo, hi;
};

// One AESENC round of `state` with round key `key`, in portable code.
Block aesencTable(Block state, Block key);

// The noise block b of stream `seed` (AES-NI when the CPU has it).
Block block(uint64_t seed, uint64_t b);

// 32-bit word i mod 4 of `bl`.
inline uint32_t wordOf(const Block& bl, uint64_t i) {
  return static_cast<uint32_t>(((i & 2) ? bl.hi : bl.lo) >> (32 * (i & 1)));
}

// 32-bit word i mod 4 of block i / 4: the noise of coordinate i.
inline uint32_t word(uint64_t seed, uint64_t i) { return wordOf(block(seed, i / 4), i); }

#if defined(__x86_64__) && defined(__GNUC__)
// The noise of 16 consecutive coordinates from the splitmix states of their 8
// words (lane l of `states` holding word w + l's; compress/kernels/Splitmix512.h
// states8): the 16 x 32-bit view of the result. Needs AVX-512 F and VAES.
__attribute__((target("avx512f,vaes"), always_inline)) inline __m512i noise16(__m512i states) {
  const __m512i k1 = _mm512_broadcast_i32x4(_mm_set_epi64x(static_cast<long long>(kKey1Hi), static_cast<long long>(kKey1Lo)));
  const __m512i k2 = _mm512_broadcast_i32x4(_mm_set_epi64x(static_cast<long long>(kKey2Hi), static_cast<long long>(kKey2Lo)));
  return _mm512_aesenc_epi128(_mm512_aesenc_epi128(states, k1), k2);
}

// noise16 for 8 coordinates from the states of their 4 words
// (compress/kernels/Splitmix256.h states), with 128-bit AES-NI on each half.
__attribute__((target("avx2,aes"), always_inline)) inline __m256i noise8(__m256i states) {
  const __m128i k1 = _mm_set_epi64x(static_cast<long long>(kKey1Hi), static_cast<long long>(kKey1Lo));
  const __m128i k2 = _mm_set_epi64x(static_cast<long long>(kKey2Hi), static_cast<long long>(kKey2Lo));
  const __m128i lo = _mm_aesenc_si128(_mm_aesenc_si128(_mm256_castsi256_si128(states), k1), k2);
  const __m128i hi = _mm_aesenc_si128(_mm_aesenc_si128(_mm256_extracti128_si256(states, 1), k1), k2);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}
#endif

// Whether the CPU has AES-NI (x86-64) / VAES with AVX-512 F (false elsewhere).
bool haveAesNi();
bool haveVaes512();

}  // namespace gradzip::compress::aesnoise
