// Counter-based randomness for compressors: the i-th random word of a stream is a
// pure function of (seed, i), so encoding is reproducible from the Context's
// seeds alone (no generator state to checkpoint), parallel loops need no
// coordination, and every platform draws the same numbers. The stream is
// splitmix64 (Steele, Lea, Flood, OOPSLA 2014): state_i = seed + (i+1)·γ,
// output = its finaliser; it passes BigCrush, which is ample for dithering.
// C_nat's encoder draws from compress/kernels/AesNoise.h instead: two AES rounds over
// these same states, cheaper per bit where VAES or AES-NI is present.
#pragma once

#include <cstdint>

namespace gradzip::compress {

// splitmix64's increment γ and its finaliser's two multipliers (also used by
// the vector kernels that draw the same words, e.g. compress/kernels/Splitmix256.h).
constexpr uint64_t kSplitmixGamma = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kSplitmixMul1 = 0xbf58476d1ce4e5b9ULL;
constexpr uint64_t kSplitmixMul2 = 0x94d049bb133111ebULL;

// splitmix64 finaliser: a bijective, well-mixed 64-bit hash.
inline uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * kSplitmixMul1;
  x = (x ^ (x >> 27)) * kSplitmixMul2;
  return x ^ (x >> 31);
}

// 64 random bits, word i of stream `seed`.
inline uint64_t randomBits(uint64_t seed, uint64_t i) { return mix64(seed + (i + 1) * kSplitmixGamma); }

// Uniform on the 2^24-point grid {k / 2^24} ⊂ [0, 1), exact in float. Rounding up
// iff u < f happens with probability ceil(f·2^24)/2^24, i.e. within 2^-24 of f.
inline float uniform01(uint64_t seed, uint64_t i) {
  return static_cast<float>(randomBits(seed, i) >> 40) * (1.0f / 16777216.0f);
}

// The same grid from half a word, so one word serves two coordinates: i takes
// the upper 24 bits of the low (even i) or high (odd i) 32-bit half of word
// i/2 (randomHalf: those 32 bits). Used where the noise is drawn per
// coordinate in bulk (THC's uniform SQ).
inline uint32_t randomHalf(uint64_t seed, uint64_t i) {
  return static_cast<uint32_t>(randomBits(seed, i / 2) >> (32 * (i & 1)));
}
inline float uniform01Half(uint64_t seed, uint64_t i) {
  return static_cast<float>(randomHalf(seed, i) >> 8) * (1.0f / 16777216.0f);
}

// A derived stream: independent of `seed`'s own stream for distinct `salt`s.
inline uint64_t deriveSeed(uint64_t seed, uint64_t salt) { return mix64(seed ^ mix64(salt + 0x632be59bd9b4e019ULL)); }

}  // namespace gradzip::compress
