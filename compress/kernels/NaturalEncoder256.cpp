// The AVX2 encoder of natural compression C_nat (natural-compression paper,
// Definition 1; compress/kernels/NaturalKernels.h): encodeLoop's branch-free
// arithmetic on eight 32-bit lanes, 32 coordinates per step. The noise of
// eight consecutive coordinates is two noise blocks (naturalNoise,
// compress/kernels/AesNoise.h), AES-NI's rounds over the splitmix64 states of four
// words (compress/kernels/Splitmix256.h). Codes are narrowed with two
// saturating packs and one lane permutation. Bit-identical to the portable
// loop (tested in SimdKernelsTest at every level the CPU has).
#include "compress/NaturalCompression.h"
#include "compress/kernels/NaturalKernelsDetail.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "compress/kernels/AesNoise.h"
#include "compress/kernels/Splitmix256.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace gradzip::compress::nat::detail {
namespace {

#define GZ_NAT_AVX2 __attribute__((target("avx2,fma,f16c,aes")))

constexpr uint32_t kLowestBits = static_cast<uint32_t>(kNatMinExp + 127) << 23;  // bits of 2^-50

// Codes (in the low byte of each 32-bit lane) of the eight floats at x, whose
// noise words are `rnd`; raises *mx to their largest |bits| (its exponent
// field is the largest exponent field) and adds the clipped lanes (as -1
// each) to *clipNeg.
GZ_AVX2_INLINE __m256i codes8(const float* x, __m256i rnd, bool stochastic, __m256i* mx, __m256i* clipNeg) {
  constexpr int kMaxField = 127 + kNatMaxExp;  // exponent field of 2^10
  const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  *mx = _mm256_max_epu32(*mx, a);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80));
  const __m256i frac = _mm256_and_si256(rnd, _mm256_set1_epi32(0x7FFFFF));
  // Definition 1 on the bits: the exponent field of (|t| + r) & 0xFF800000 is
  // e + 127 (encodeLoop); the code's low seven bits are 0x40 | (e − kNatMinExp),
  // an addition since e − kNatMinExp < 64.
  const __m256i field =
      _mm256_srli_epi32(_mm256_add_epi32(a, stochastic ? frac : _mm256_set1_epi32(0x400000)), 23);
  const __m256i big = _mm256_cmpgt_epi32(field, _mm256_set1_epi32(kMaxField));
  *clipNeg = _mm256_add_epi32(*clipNeg, big);
  const __m256i normal = _mm256_or_si256(
      sign, _mm256_add_epi32(_mm256_min_epi32(field, _mm256_set1_epi32(kMaxField)),
                             _mm256_set1_epi32(0x40 - 127 - kNatMinExp)));
  const __m256i isTiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(kLowestBits)), a);  // |t| < 2^-50
  if (_mm256_testz_si256(isTiny, isTiny)) return normal;  // the common case: no zeros, nothing below 2^-50
  // Below 2^-50: 2^-50 with probability |t|/2^-50 (nearer of 0, 2^-50 when deterministic).
  const __m256 av = _mm256_castsi256_ps(a);
  const __m256 lowest = _mm256_set1_ps(std::ldexp(1.0f, kNatMinExp));
  __m256 up;
  if (stochastic) {
    const __m256 uf = _mm256_mul_ps(_mm256_cvtepi32_ps(frac), _mm256_set1_ps(1.0f / 8388608.0f));
    up = _mm256_cmp_ps(_mm256_mul_ps(uf, lowest), av, _CMP_LT_OQ);
  } else {
    up = _mm256_cmp_ps(_mm256_add_ps(av, av), lowest, _CMP_GE_OQ);
  }
  const __m256i tiny = _mm256_and_si256(_mm256_castps_si256(up), _mm256_or_si256(sign, _mm256_set1_epi32(0x40)));
  return _mm256_blendv_epi8(normal, tiny, isTiny);
}

}  // namespace

GZ_NAT_AVX2 int64_t encode256(const float* x, int64_t n, uint64_t seed, bool stochastic, uint8_t* out,
                              uint32_t* expMax) {
  int64_t clipped = 0;
  __m256i mx = _mm256_setzero_si256();
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i step = splitmix256::step4();
  __m256i state = splitmix256::states(seed, 0);
  int64_t i = 0;
  // Blocks of at most 2^28 coordinates keep each lane's clip count below 2^31.
  for (int64_t blockEnd = 0; i + 32 <= n; i = blockEnd) {
    blockEnd = std::min(n / 32 * 32, i + (int64_t{1} << 28));
    __m256i clipNeg = _mm256_setzero_si256();
    for (; i < blockEnd; i += 32) {
      __m256i c[4];
      for (int k = 0; k < 4; ++k) {
        const __m256i rnd = aesnoise::noise8(state);
        state = _mm256_add_epi64(state, step);
        c[k] = codes8(x + i + 8 * k, rnd, stochastic, &mx, &clipNeg);
      }
      // The packs work within 128-bit halves: 4-code groups come out as
      // c0[0..3] c1[0..3] c2[0..3] c3[0..3] c0[4..7] ..; `order` restores c0, c1, c2, c3.
      const __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permutevar8x32_epi32(p, order));
    }
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), clipNeg);
    for (int32_t v : lanes) clipped -= v;
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), mx);
  for (uint32_t v : lanes) *expMax = std::max(*expMax, v & 0x7F800000u);
  return clipped + encodeLoop(x + i, n - i, seed, static_cast<uint64_t>(i), stochastic, out + i, expMax);
}

}  // namespace gradzip::compress::nat::detail
#endif
