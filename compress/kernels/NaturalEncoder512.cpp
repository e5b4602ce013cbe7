// The AVX-512 encoders of natural compression C_nat (natural-compression paper,
// Definition 1; compress/kernels/NaturalKernels.h): 64 coordinates per step, four
// 16-lane vectors whose noise is four noise blocks each (naturalNoise: two
// VAES rounds over the splitmix64 states of 8 words, compress/kernels/AesNoise.h).
// With VBMI, a step whose exponents all land in the common range is coded
// from (bits + r) >> 23 alone with byte permutes and byte arithmetic, and any
// other step (zeros, values below 2^-49, clips, non-finite input) is
// recomputed exactly; without VBMI every step takes the exact path.
// Codes are narrowed with saturating packs and one lane permutation rather
// than vpmovdb, one per 16 codes, which is slow on AMD Zen 4
// (experiments/results/compressors_log.md, "Kernel measurements").
// Bit-identical to the portable loop (tested in SimdKernelsTest).
#include "compress/NaturalCompression.h"
#include "compress/kernels/NaturalKernelsDetail.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "compress/kernels/AesNoise.h"
#include "compress/kernels/Splitmix512.h"

#include <cmath>

namespace gradzip::compress::nat::detail {
namespace {

#define GZ_NAT_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,vaes")))
#define GZ_NAT_INLINE __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,vaes"), always_inline)) inline

constexpr int kMaxField = 127 + kNatMaxExp;         // exponent field of 2^10
constexpr uint32_t kLowestBits = static_cast<uint32_t>(kNatMinExp + 127) << 23;  // bits of 2^-50

// The noise of 64 consecutive coordinates per next(): four vectors of 16 x 23
// bits, vector k from the splitmix64 states of words 8k..8k+7 of the step's 32
// (seed + (w + 1)·γ of word w, +32γ per step), i.e. its noise blocks 4k..4k+3
// (naturalNoise).
template <bool kStochastic>
struct Noise64 {
  __m512i st[4];

  // The noise of coordinates first, first + 1, .. (first a multiple of 64).
  GZ_NAT_INLINE Noise64(uint64_t seed, int64_t first) {
    for (int k = 0; k < 4; ++k)
      st[k] = splitmix512::states8(seed, static_cast<uint64_t>(first) / 2 + 8 * static_cast<uint64_t>(k));
  }

  GZ_NAT_INLINE void next(__m512i r[4]) {
    const __m512i step32 = splitmix512::advance(32);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      if constexpr (kStochastic) {
        r[k] = _mm512_and_si512(aesnoise::noise16(st[k]), _mm512_set1_epi32(0x7FFFFF));
        st[k] = _mm512_add_epi64(st[k], step32);
      } else {
        r[k] = _mm512_set1_epi32(0x400000);  // nearest power of two
      }
    }
  }
};

// Codes of the lanes with |t| < 2^-50 (naturalEncode's first branch): 2^-50
// with probability |t|/2^-50 (r/2^23 < |t|/2^-50, both sides exact in float),
// else 0; the deterministic variant takes the nearer of the two.
template <bool kStochastic>
GZ_NAT_AVX512 __m512i tinyCodes(__m512i u, __m512i a, __m512i r) {
  const __m512 av = _mm512_castsi512_ps(a);
  const __m512 lowest = _mm512_set1_ps(std::ldexp(1.0f, kNatMinExp));
  __mmask16 up;
  if constexpr (kStochastic)
    up = _mm512_cmp_ps_mask(
        _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(r), _mm512_set1_ps(1.0f / 8388608.0f)), lowest), av,
        _CMP_LT_OQ);
  else
    up = _mm512_cmp_ps_mask(_mm512_add_ps(av, av), lowest, _CMP_GE_OQ);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80));
  return _mm512_maskz_mov_epi32(up, _mm512_or_si512(sign, _mm512_set1_epi32(0x40)));
}

// The exact codes (one per 32-bit lane) of x[0, 16) with noise r (23 bits per
// lane; 2^22 when deterministic), for every input. Raises maxAbs to the lanes'
// |bits| and counts the 2^10 clips per lane into clips.
template <bool kStochastic>
GZ_NAT_AVX512 __m512i exactCodes16(const float* x, __m512i r, __m512i& maxAbs, __m512i& clips) {
  const __m512i u = _mm512_loadu_si512(x);
  const __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  maxAbs = _mm512_max_epu32(maxAbs, a);
  // Definition 1 on the bits: the exponent field f of |t| + r is e + 127 (a
  // carry out of the mantissa rounds up, with probability mantissa/2^23).
  const __m512i f = _mm512_srli_epi32(_mm512_add_epi32(a, r), 23);
  const __m512i maxField = _mm512_set1_epi32(kMaxField);
  clips = _mm512_mask_add_epi32(clips, _mm512_cmpgt_epu32_mask(f, maxField), clips, _mm512_set1_epi32(1));
  // 0x40 | (min(e, 10) + 50) = min(f, 137) − 13: e + 50 lies in [0, 60] for
  // |t| >= 2^-50, so or-ing the flag 0x40 is adding it.
  const __m512i low = _mm512_sub_epi32(_mm512_min_epu32(f, maxField), _mm512_set1_epi32(127 + kNatMinExp - 0x40));
  // | the sign (bit 31 of t moved to bit 7): (A & B) | C is ternary-logic 0xEA.
  const __m512i code = _mm512_ternarylogic_epi32(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80), low, 0xEA);
  const __mmask16 small = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(static_cast<int>(kLowestBits)));
  return small ? _mm512_mask_mov_epi32(code, small, tinyCodes<kStochastic>(u, a, r)) : code;
}

// exactCodes16 of x[0, 64) with noise r, stored as bytes at out.
template <bool kStochastic>
GZ_NAT_AVX512 void exactStep(const float* x, const __m512i r[4], __m512i& maxAbs, __m512i& clips, uint8_t* out) {
  __m512i c[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) c[k] = exactCodes16<kStochastic>(x + 16 * k, r[k], maxAbs, clips);
  // Codes are in [0, 255], so the saturating packs are exact; they interleave
  // their sources per 128-bit lane (dword order 0,4,8,12, 1,5,9,13, ...), and
  // the permute puts the dwords back in order.
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  const __m512i b = _mm512_packus_epi16(_mm512_packus_epi32(c[0], c[1]), _mm512_packus_epi32(c[2], c[3]));
  _mm512_storeu_si512(out, _mm512_permutexvar_epi32(order, b));
}

// The finiteness field and the clip count of the vector accumulators, plus the
// scalar tail [body, n).
template <bool kStochastic>
GZ_NAT_AVX512 int64_t finish(__m512i maxAbs, __m512i clips, const float* x, int64_t body, int64_t n, uint64_t seed,
                             uint8_t* out, uint32_t* expMax) {
  uint32_t m = _mm512_reduce_max_epu32(maxAbs) & 0x7F800000u;  // the exponent field is monotone in |bits|
  int64_t clipped = _mm512_reduce_add_epi32(clips);
  clipped += encodeLoop(x + body, n - body, seed, static_cast<uint64_t>(body), kStochastic, out + body, &m);
  *expMax = m > *expMax ? m : *expMax;
  return clipped;
}

// encodeLoop with AVX-512 (no VBMI) from coordinate 0 of the stream, 64
// coordinates per step, all through exactCodes16.
template <bool kStochastic>
GZ_NAT_AVX512 int64_t encodeExact512(const float* x, int64_t n, uint64_t seed, uint8_t* out, uint32_t* expMax) {
  const int64_t body = n / 64 * 64;
  Noise64<kStochastic> noise(seed, 0);
  __m512i maxAbs = _mm512_setzero_si512(), clips = _mm512_setzero_si512();
  for (int64_t i = 0; i < body; i += 64) {
    __m512i r[4];
    noise.next(r);
    exactStep<kStochastic>(x + i, r, maxAbs, clips, out + i);
  }
  return finish<kStochastic>(maxAbs, clips, x, body, n, seed, out, expMax);
}

// exactStep of coordinates [i, i + 64) with their noise regenerated from the
// seed (off the hot loop, which keeps its noise in registers).
template <bool kStochastic>
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,vaes"), noinline)) void rareStep(
    uint64_t seed, int64_t i, const float* x, __m512i& maxAbs, __m512i& clips, uint8_t* out) {
  __m512i r[4];
  Noise64<kStochastic>(seed, i).next(r);
  exactStep<kStochastic>(x + i, r, maxAbs, clips, out + i);
}

// encodeLoop with AVX-512 and VBMI from coordinate 0 of the stream, 64
// coordinates per step. The common case, every f = e + 127 in [78, 137]
// (2^-49 <= |t'| <= 2^10 after rounding, finite), needs no clip, no tiny-value
// rule and no finiteness test: w = (bits(t) + r) >> 23 = sign·2^8 + f is all
// it needs, and the code is f − 13 + sign·2^7. The 64 words are packed to 16
// bits, two byte permutes gather the 64 f bytes and the 64 sign bytes in
// coordinate order, and the rest is byte arithmetic on one vector. A step with
// any other coordinate (zeros included) is recomputed by exactStep with the
// same noise, which also finds non-finite inputs (their f is 255, or 0 after
// the carry wraps).
template <bool kStochastic>
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx512vbmi,vaes"))) int64_t encodeVbmi(
    const float* x, int64_t n, uint64_t seed, uint8_t* out, uint32_t* expMax) {
  const int64_t body = n / 64 * 64;
  // packus_epi32(w0, w1) holds, in 128-bit lane L, w0's words 4L..4L+3 then
  // w1's. Byte j of fIdx (sIdx) is where coordinate j's low (high) byte lies in
  // packus(w0, w1) ‖ packus(w2, w3).
  alignas(64) uint8_t fIdx[64], sIdx[64];
  for (int j = 0; j < 64; ++j) {
    const int k = j / 16, e = j % 16;
    fIdx[j] = static_cast<uint8_t>(64 * (k / 2) + 2 * (8 * (e / 4) + 4 * (k % 2) + e % 4));
    sIdx[j] = static_cast<uint8_t>(fIdx[j] + 1);
  }
  const __m512i fI = _mm512_load_si512(fIdx), sI = _mm512_load_si512(sIdx);
  const __m512i minField = _mm512_set1_epi8(127 + kNatMinExp + 1);     // 78
  const __m512i span = _mm512_set1_epi8(kNatMaxExp - kNatMinExp - 1);  // 137 − 78
  const __m512i flagBias = _mm512_set1_epi8(127 + kNatMinExp - 0x40);  // f − 13 = 0x40 | (e + 50)
  __m512i maxAbs = _mm512_setzero_si512(), clips = _mm512_setzero_si512();
  // The inner loop runs common steps and holds no call (a call would make it
  // spill its noise states and constants every step: all vector registers are
  // caller-saved); it leaves at a rare step, which the outer loop recomputes.
  for (int64_t i = 0; i < body; i += 64) {
    for (Noise64<kStochastic> noise(seed, i); i < body; i += 64) {
      __m512i r[4], w[4];
      noise.next(r);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k)  // Definition 1 on the bits; bits(t) + r keeps the sign (|t| + r < 2^31)
        w[k] = _mm512_srli_epi32(_mm512_add_epi32(_mm512_loadu_si512(x + i + 16 * k), r[k]), 23);
      // w <= 511: the saturating 32 -> 16 bit packs are exact.
      const __m512i p01 = _mm512_packus_epi32(w[0], w[1]), p23 = _mm512_packus_epi32(w[2], w[3]);
      const __m512i f = _mm512_permutex2var_epi8(p01, fI, p23);
      const __m512i sign = _mm512_permutex2var_epi8(p01, sI, p23);  // 0 or 1 per byte
      const __mmask64 rare = _mm512_cmpgt_epu8_mask(_mm512_sub_epi8(f, minField), span);
      if (__builtin_expect(rare != 0, 0)) break;
      // f − 13 < 0x80, so | sign·2^7 sets the sign bit (a 16-bit shift: no byte carries over).
      _mm512_storeu_si512(out + i, _mm512_or_si512(_mm512_sub_epi8(f, flagBias), _mm512_slli_epi16(sign, 7)));
    }
    if (i < body) rareStep<kStochastic>(seed, i, x, maxAbs, clips, out);
  }
  return finish<kStochastic>(maxAbs, clips, x, body, n, seed, out, expMax);
}

}  // namespace

int64_t encode512(const float* x, int64_t n, uint64_t seed, bool stochastic, bool vbmi, uint8_t* out,
                  uint32_t* expMax) {
  if (vbmi)
    return stochastic ? encodeVbmi<true>(x, n, seed, out, expMax) : encodeVbmi<false>(x, n, seed, out, expMax);
  return stochastic ? encodeExact512<true>(x, n, seed, out, expMax) : encodeExact512<false>(x, n, seed, out, expMax);
}

}  // namespace gradzip::compress::nat::detail
#endif
