// Tests compress/kernels/AesNoise.{h,cpp}: the portable AES round reproduces FIPS-197's
// worked example (Appendix B, round 1) and equals AES-NI's AESENC on random
// states and keys; a noise block is the two rounds over the splitmix64 states
// the header names; the AVX-512 (VAES) and AVX2 (AES-NI) helpers give the
// scalar words lane for lane; and the low 23 bits C_nat uses are uniform
// (a chi-square test on their top 8 bits).
#include "compress/kernels/AesNoise.h"
#include "compress/kernels/Splitmix256.h"
#include "compress/kernels/Splitmix512.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace gradzip::compress::aesnoise {
namespace {

// Bytes b[0..15] as a Block (byte j of the block is b[j]).
Block fromBytes(const std::vector<uint8_t>& b) {
  Block out{0, 0};
  for (int j = 0; j < 16; ++j) (j < 8 ? out.lo : out.hi) |= static_cast<uint64_t>(b[j]) << (8 * (j % 8));
  return out;
}

TEST(AesNoise, TableRoundReproducesFips197AppendixB) {
  // round[1].start, round[1].k_sch and round[2].start of the cipher example.
  const Block start = fromBytes({0x19, 0x3d, 0xe3, 0xbe, 0xa0, 0xf4, 0xe2, 0x2b, 0x9a, 0xc6, 0x8d, 0x2a, 0xe9, 0xf8,
                                 0x48, 0x08});
  const Block key = fromBytes({0xa0, 0xfa, 0xfe, 0x17, 0x88, 0x54, 0x2c, 0xb1, 0x23, 0xa3, 0x39, 0x39, 0x2a, 0x6c,
                               0x76, 0x05});
  const Block next = fromBytes({0xa4, 0x9c, 0x7f, 0xf2, 0x68, 0x9f, 0x35, 0x2b, 0x6b, 0x5b, 0xea, 0x43, 0x02, 0x6a,
                                0x50, 0x49});
  const Block got = aesencTable(start, key);
  EXPECT_EQ(got.lo, next.lo);
  EXPECT_EQ(got.hi, next.hi);
}

TEST(AesNoise, BlockIsTwoTableRoundsOverTheSplitmixStates) {
  for (uint64_t seed : {0ULL, 1ULL, 0xDEADBEEFCAFEF00DULL})
    for (uint64_t b : {0ULL, 1ULL, 7ULL, 123456789ULL}) {
      const Block p{seed + (2 * b + 1) * kSplitmixGamma, seed + (2 * b + 2) * kSplitmixGamma};
      const Block want = aesencTable(aesencTable(p, {kKey1Lo, kKey1Hi}), {kKey2Lo, kKey2Hi});
      const Block got = block(seed, b);  // AES-NI where the CPU has it
      EXPECT_EQ(got.lo, want.lo) << seed << " " << b;
      EXPECT_EQ(got.hi, want.hi) << seed << " " << b;
      for (uint64_t w = 0; w < 4; ++w) EXPECT_EQ(word(seed, 4 * b + w), wordOf(want, w));
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("aes"))) Block aesNi(Block s, Block k) {
  const __m128i r = _mm_aesenc_si128(_mm_set_epi64x(static_cast<long long>(s.hi), static_cast<long long>(s.lo)),
                                     _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo)));
  alignas(16) uint64_t out[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(out), r);
  return {out[0], out[1]};
}

TEST(AesNoise, TableRoundEqualsAesNi) {
  if (!haveAesNi()) GTEST_SKIP() << "no AES-NI on this CPU";
  std::mt19937_64 rng(7);
  for (int t = 0; t < 20000; ++t) {
    const Block s{rng(), rng()}, k{rng(), rng()};
    const Block a = aesencTable(s, k), b = aesNi(s, k);
    ASSERT_EQ(a.lo, b.lo) << t;
    ASSERT_EQ(a.hi, b.hi) << t;
  }
}

// The vector helpers on the states the encoders hold (Splitmix512.h states8,
// Splitmix256.h states) of words w...
__attribute__((target("avx512f,vaes"))) void noise16At(uint64_t seed, uint64_t w, uint32_t out[16]) {
  _mm512_storeu_si512(out, noise16(splitmix512::states8(seed, w)));
}

__attribute__((target("avx2,fma,f16c,aes"))) void noise8At(uint64_t seed, uint64_t w, uint32_t out[8]) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), noise8(splitmix256::states(seed, w)));
}

TEST(AesNoise, VectorHelpersGiveTheScalarWords) {
  for (uint64_t seed : {3ULL, 0x0123456789ABCDEFULL})
    for (uint64_t w : {0ULL, 8ULL, 1000ULL}) {  // words w.. are coordinates 2w..
      if (haveVaes512()) {
        uint32_t v[16];
        noise16At(seed, w, v);
        for (int l = 0; l < 16; ++l) EXPECT_EQ(v[l], word(seed, 2 * w + l)) << seed << " " << w << " " << l;
      }
      if (haveAesNi() && __builtin_cpu_supports("avx2")) {
        uint32_t v[8];
        noise8At(seed, w, v);
        for (int l = 0; l < 8; ++l) EXPECT_EQ(v[l], word(seed, 2 * w + l)) << seed << " " << w << " " << l;
      }
    }
}
#endif

// Bits 15..22 of the words (the top of C_nat's 23 bits) over 2^18 coordinates
// of each of 4 seeds, in 256 bins: chi-square with 255 degrees of freedom has
// mean 255 and standard deviation sqrt(510) ≈ 22.6; 255 + 6·22.6 ≈ 390 fails a
// uniform stream with probability below 1e-8.
TEST(AesNoise, TopBitsOfTheNoiseAreUniform) {
  constexpr int kBins = 256;
  constexpr int64_t n = int64_t{1} << 18;
  for (uint64_t seed : {1ULL, 2ULL, 0xFFFFFFFFFFFFFFFFULL, 0x8000000000000000ULL}) {
    std::vector<int64_t> count(kBins, 0);
    for (int64_t i = 0; i < n; ++i) ++count[(word(seed, static_cast<uint64_t>(i)) >> 15) & 0xFF];
    const double expect = static_cast<double>(n) / kBins;
    double chi2 = 0;
    for (int64_t c : count) chi2 += (c - expect) * (c - expect) / expect;
    EXPECT_LT(chi2, 390.0) << seed;
    EXPECT_GT(chi2, 255.0 - 6 * std::sqrt(510.0)) << seed;  // not suspiciously even either
  }
}

}  // namespace
}  // namespace gradzip::compress::aesnoise
