// Implements compress/kernels/ThcBlock512.h, forward direction (the inverse is in
// ThcBlock512Inverse.cpp). A 256-group (16 registers) is the unit of the first
// pass: strides 1..8 inside each register, 16..128 between them
// (compress/kernels/FwhtRegisters.h). The second pass takes column j of every group (G
// registers, 256 floats apart) and runs the remaining levels between them, so
// each level still sees exactly the pairs the plain loops pair. The
// quantiser's noise is the 16 x 32-bit view of 8 splitmix64 words (coordinates
// 2w and 2w+1 take word w's halves, uniform01Half), the random signs of 16
// coordinates are 16 bits of one word of D applied with a masked xor.
#include "compress/kernels/ThcBlock512.h"

#include "compress/kernels/FwhtRegisters.h"
#include "compress/kernels/SimdKernels.h"
#include "compress/kernels/Splitmix512.h"
#include "compress/kernels/ThcBlock512Detail.h"

namespace gradzip::compress::thc::block512 {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

// ~randomBits for the 8 words whose splitmix64 states are z: the finaliser's
// last xor as an xnor (ternary logic 0xC3), for free.
GZ_THC512 inline __m512i finaliseNot8(__m512i z) {
  z = splitmix512::multiply8(z);
  return _mm512_ternarylogic_epi64(z, _mm512_srli_epi64(z, 31), z, 0xC3);
}

// The squares of x[0, 16) (a: the same 16 floats, zero past the block's end)
// into two 8-lane double accumulators: x² is exact in double, only the sums
// round. rotateGroups and sumSquares add in this same order, so the norms of
// the codec's encode and of the all-reduce's norm round are equal bit for bit.
GZ_THC512 inline void addSquares(const float* x, bool whole, __m512 a, __m512d& acc0, __m512d& acc1) {
  __m512d lo, hi;
  if (whole) {  // converts straight from memory (no lane extract)
    lo = _mm512_cvtps_pd(_mm256_loadu_ps(x));
    hi = _mm512_cvtps_pd(_mm256_loadu_ps(x + 8));
  } else {
    lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
    hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  }
  acc0 = _mm512_fmadd_pd(lo, lo, acc0);
  acc1 = _mm512_fmadd_pd(hi, hi, acc1);
}

// The quantiser is roundUniform (StochasticQuantize.h) in 32-bit lanes:
// T = ceil(2^24·y) + (2^24 − 1 − k), k = randomHalf >> 8, so T >> 24 = c and
// T's byte 3 is c mod 2^8 (|y| <= L < 128 keeps T in range).
template <int G, int kFieldBits>
GZ_THC512 void quantizeColumnsG(const float* R, int64_t lo, float inv, float scale, bool zero, float L, int32_t Lf,
                                uint64_t seed, uint8_t* out) {
  const __m512 invV = _mm512_set1_ps(inv), scaleV = _mm512_set1_ps(zero ? 0.0f : scale),
               boundV = _mm512_set1_ps(zero ? 0.0f : L), two24 = _mm512_set1_ps(16777216.0f);
  // splitmix64 states seed + (w + 1)·γ of the 8 words w of coordinates
  // lo + 256g + j .. + 15 (w = that / 2 + 0..7), advanced by 8γ per column.
  __m512i st[G];
  for (int g = 0; g < G; ++g) st[g] = splitmix512::states8(seed, static_cast<uint64_t>(lo + 256 * g) / 2);
  const __m512i step = splitmix512::advance(8);
  // 4-bit fields: byte w = (c_2w + Lf) | (c_2w+1 + Lf) << 4, and coordinates
  // 2w, 2w+1 share a 64-bit lane. A multishift moves byte 3 of the lane's two
  // 32-bit halves (c mod 2^8) to bytes 0 and 1, a multiply-add of those bytes
  // (signed) by 1 and 16 leaves c_2w + 16·c_2w+1 in the lane's low byte (mod
  // 2^8), and 17·Lf is added after one byte permute per 32 codes gathers them.
  const __m512i byte3s = _mm512_set1_epi64(static_cast<long long>((56ULL << 8) | 24ULL));
  const __m512i weights = _mm512_set1_epi64(static_cast<long long>((16ULL << 8) | 1ULL));
  const __m512i off8 = _mm512_set1_epi32(Lf);
  alignas(64) __m512i pairs[kFieldBits == 4 ? 16 * G : 1];
  for (int64_t j = 0; j < 256; j += 16) {
    __m512 v[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) v[g] = _mm512_loadu_ps(R + 256 * g + j);
    fwht::registerLevels<G>(v);  // element strides 256 .. B/2
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      const int64_t k = 256 * g + j;
      const __m512i kbar = _mm512_srli_epi32(finaliseNot8(st[g]), 8);  // 2^24 − 1 − k per coordinate
      st[g] = _mm512_add_epi64(st[g], step);
      // The orthonormal scale (RandomizedHadamard::forward), then Thc::quantize's R·(L/M), clamped:
      // vrangeps "smaller magnitude, sign of the first operand" is min(max(r, −L), L) in one
      // instruction (bound 0 when M = 0: ±0, whose codes are those of y = 0).
      const __m512 y = _mm512_range_ps(_mm512_mul_ps(_mm512_mul_ps(v[g], invV), scaleV), boundV, 0x02);
      const __m512i t = _mm512_add_epi32(
          _mm512_cvt_roundps_epi32(_mm512_mul_ps(y, two24), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC), kbar);
      if constexpr (kFieldBits == 4) {
        _mm512_store_si512(pairs + k / 16, _mm512_maddubs_epi16(weights, _mm512_multishift_epi64_epi8(byte3s, t)));
      } else {
        const __m512i c = _mm512_add_epi32(_mm512_srai_epi32(t, 24), off8);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), _mm512_cvtepi32_epi8(c));
      }
    }
  }
  if constexpr (kFieldBits == 4) {
    const __m512i lowBytes = _mm512_set_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                             0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 120,
                                             112, 104, 96, 88, 80, 72, 64, 56, 48, 40, 32, 24, 16, 8, 0);
    const __m128i bias = _mm_set1_epi8(static_cast<char>(17 * Lf));  // Lf in both nibbles
    for (int64_t q = 0; q < 16 * G; q += 2)  // codes 16q .. 16q + 31: bytes 8q .. 8q + 15
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * q),
                       _mm_add_epi8(_mm512_castsi512_si128(_mm512_permutex2var_epi8(pairs[q], lowBytes, pairs[q + 1])),
                                    bias));
  }
}

template <int kFieldBits>
GZ_THC512 void quantizeColumnsF(const float* R, int64_t lo, int64_t B, float inv, float scale, bool zero, float L,
                                int32_t Lf, uint64_t seed, uint8_t* out) {
  switch (B / 256) {
    case 1: return quantizeColumnsG<1, kFieldBits>(R, lo, inv, scale, zero, L, Lf, seed, out);
    case 2: return quantizeColumnsG<2, kFieldBits>(R, lo, inv, scale, zero, L, Lf, seed, out);
    case 4: return quantizeColumnsG<4, kFieldBits>(R, lo, inv, scale, zero, L, Lf, seed, out);
    case 8: return quantizeColumnsG<8, kFieldBits>(R, lo, inv, scale, zero, L, Lf, seed, out);
    default: return quantizeColumnsG<16, kFieldBits>(R, lo, inv, scale, zero, L, Lf, seed, out);
  }
}

// rotateGroups for blocks whose coordinates all exist (kFull: no masks) or not,
// with or without the sum of squares.
template <bool kSquares, bool kFull>
GZ_THC512 double rotateGroupsT(const float* x, int64_t valid, const uint64_t* signs, int64_t B, float* R) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  for (int64_t g = 0; g < B; g += 256) {
    __m512 v[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      const int64_t k = g + 16 * r;
      __m512 a;
      if constexpr (kFull)
        a = _mm512_loadu_ps(x + k);
      else
        a = _mm512_maskz_loadu_ps(detail::firstLanes(valid - k), x + k);  // zero padding past valid
      if constexpr (kSquares) addSquares(x + k, kFull || k + 16 <= valid, a, acc0, acc1);
      v[r] = fwht::strides1to8(detail::flip(a, detail::signMask(signs, k)));
    }
    fwht::registerLevels<16>(v);  // element strides 16 .. 128
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) _mm512_storeu_ps(R + g + 16 * r, v[r]);
  }
  return kSquares ? _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1)) : 0.0;
}

GZ_THC512 double sumSquaresT(const float* x, int64_t valid, int64_t B) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  for (int64_t k = 0; k < B; k += 16)
    addSquares(x + k, k + 16 <= valid, _mm512_maskz_loadu_ps(detail::firstLanes(valid - k), x + k), acc0, acc1);
  return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}

}  // namespace

bool supportsBlock(int64_t B) {
  static const bool vbmi = __builtin_cpu_supports("avx512vbmi");
  return simd::haveAvx512() && vbmi && B >= 256 && B <= 4096 && B % 256 == 0;
}

bool supports(int64_t B, int fieldBits) { return (fieldBits == 4 || fieldBits == 8) && supportsBlock(B); }

double sumSquares(const float* x, int64_t valid, int64_t B) { return sumSquaresT(x, valid, B); }

GZ_THC512 void signWords(uint64_t seed, uint64_t first, int64_t count, uint64_t* out) {
  // Lane l of the first step is word first + l.
  __m512i st = splitmix512::states8(seed, first);
  const __m512i step = splitmix512::advance(8);
  for (int64_t w = 0; w < count; w += 8) {
    const __mmask8 lanes = count - w >= 8 ? static_cast<__mmask8>(0xFF) : static_cast<__mmask8>((1u << (count - w)) - 1);
    _mm512_mask_storeu_epi64(out + w, lanes, splitmix512::finalise8(st));
    st = _mm512_add_epi64(st, step);
  }
}

double rotateGroups(const float* x, int64_t valid, const uint64_t* signs, int64_t B, bool squares, float* R) {
  if (valid >= B)
    return squares ? rotateGroupsT<true, true>(x, valid, signs, B, R) : rotateGroupsT<false, true>(x, valid, signs, B, R);
  return squares ? rotateGroupsT<true, false>(x, valid, signs, B, R) : rotateGroupsT<false, false>(x, valid, signs, B, R);
}

void quantizeColumns(const float* R, int64_t lo, int64_t B, float inv, float scale, bool zero, float L, int32_t Lf,
                     int fieldBits, uint64_t seed, uint8_t* out) {
  if (fieldBits == 4) return quantizeColumnsF<4>(R, lo, B, inv, scale, zero, L, Lf, seed, out);
  quantizeColumnsF<8>(R, lo, B, inv, scale, zero, L, Lf, seed, out);
}

#else  // no AVX-512 build: callers take the portable loops

bool supportsBlock(int64_t) { return false; }
bool supports(int64_t, int) { return false; }
double sumSquares(const float*, int64_t, int64_t) { return 0; }
double rotateGroups(const float*, int64_t, const uint64_t*, int64_t, bool, float*) { return 0; }
void quantizeColumns(const float*, int64_t, int64_t, float, float, bool, float, int32_t, int, uint64_t, uint8_t*) {}
void signWords(uint64_t, uint64_t, int64_t, uint64_t*) {}

#endif

}  // namespace gradzip::compress::thc::block512
