// Implements compress/kernels/ThcKernels.h. Blocks of 2^8..2^12 coordinates with 4- or
// 8-bit fields go to the AVX-512 kernels of compress/kernels/ThcBlock512.h where the
// CPU has them (which also fuse the codec's block norms into the rotation
// pass); the portable path below does the same arithmetic, with AVX2 kernels
// where the CPU has AVX2 for the rotation (Hadamard.cpp), the signs fused with
// the block norms, and the codes with their noise. It works tile by tile (at
// most kTile coordinates of one block), so the uniform noise and the codes of
// a tile stay in L1 between the loops that produce and consume them.
// Byte words (field widths 2, 4 and 8) take the fused path; other widths pack
// through SaturatingPackedSum with the same codes.
#include "compress/kernels/ThcKernels.h"

#include "compress/kernels/CounterRng.h"
#include "compress/kernels/FwhtRegisters.h"
#include "compress/kernels/SaturatingPackedSum.h"
#include "compress/kernels/SimdKernels.h"
#include "compress/kernels/Splitmix256.h"
#include "compress/kernels/ThcBlock512.h"
#include "util/Error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace gradzip::compress::thc {
namespace {

constexpr int64_t kTile = 2048;

#if defined(__x86_64__) && defined(__GNUC__)
#define GZ_THC_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GZ_THC_CLONES
#endif

// Σ x² over [lo, hi) in double (8 independent partial sums, so the loop
// vectorises), and the exponent-field maximum (finiteness) into *expMax.
GZ_THC_CLONES double squares(const float* __restrict x, int64_t lo, int64_t hi, uint32_t* expMax) {
  double acc[8] = {};
  uint32_t mx[8] = {};
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8)
    for (int l = 0; l < 8; ++l) {
      uint32_t u;
      std::memcpy(&u, x + i + l, 4);
      const uint32_t ef = u & 0x7F800000u;
      mx[l] = ef > mx[l] ? ef : mx[l];
      acc[l] += static_cast<double>(x[i + l]) * x[i + l];
    }
  for (; i < hi; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const uint32_t ef = u & 0x7F800000u;
    mx[0] = ef > mx[0] ? ef : mx[0];
    acc[0] += static_cast<double>(x[i]) * x[i];
  }
  double s = 0;
  for (int l = 0; l < 8; ++l) {
    s += acc[l];
    *expMax = mx[l] > *expMax ? mx[l] : *expMax;
  }
  return s;
}

// One tile of codes (offset by L, so in [0, 2L]) of R[0, len): roundUniform
// (StochasticQuantize.h) with k = u·2^24, in 32-bit integers (exact: |y| <= L
// < 128, so |2^24·y| < 2^31, and 2^24·y is exact in float).
GZ_THC_CLONES void tileCodes(const float* __restrict R, const float* __restrict u, int64_t len, float inv,
                             float scale, bool zero, float L, int32_t* __restrict codes) {
  for (int64_t k = 0; k < len; ++k) {
    const float r = R[k] * inv;  // the orthonormal rotation, as RandomizedHadamard::forward's mul_
    const float y = zero ? 0.0f : std::min(std::max(r * scale, -L), L);
    const int32_t yc = static_cast<int32_t>(std::ceil(y * 16777216.0f));
    const int32_t kbar = 16777215 - static_cast<int32_t>(u[k] * 16777216.0f);  // 2^24 − 1 − k
    codes[k] = ((yc + kbar) >> 24) + static_cast<int32_t>(L);
  }
}

GZ_THC_CLONES void packBytes(const int32_t* __restrict codes, int64_t len, int bits, uint8_t* __restrict out) {
  if (bits == 4) {
    for (int64_t w = 0; w < len / 2; ++w)
      out[w] = static_cast<uint8_t>(codes[2 * w] | (codes[2 * w + 1] << 4));
  } else if (bits == 8) {
    for (int64_t w = 0; w < len; ++w) out[w] = static_cast<uint8_t>(codes[w]);
  } else {  // 2
    for (int64_t w = 0; w < len / 4; ++w)
      out[w] = static_cast<uint8_t>(codes[4 * w] | (codes[4 * w + 1] << 2) | (codes[4 * w + 2] << 4) |
                                    (codes[4 * w + 3] << 6));
  }
}

// y = (s/n)·(M/L) for the fields of `len` coordinates starting at byte `in`.
GZ_THC_CLONES void unpackBytes(const uint8_t* __restrict in, int64_t len, int bits, int32_t L, float n, float ml,
                               float* __restrict y) {
  if (bits == 4) {
    for (int64_t w = 0; w < len / 2; ++w) {
      y[2 * w] = (static_cast<float>(static_cast<int32_t>(in[w] & 0xF) - L) / n) * ml;
      y[2 * w + 1] = (static_cast<float>(static_cast<int32_t>(in[w] >> 4) - L) / n) * ml;
    }
  } else if (bits == 8) {
    for (int64_t w = 0; w < len; ++w) y[w] = (static_cast<float>(static_cast<int32_t>(in[w]) - L) / n) * ml;
  } else {  // 2
    for (int64_t w = 0; w < len / 4; ++w)
      for (int j = 0; j < 4; ++j)
        y[4 * w + j] = (static_cast<float>(static_cast<int32_t>((in[w] >> (2 * j)) & 3) - L) / n) * ml;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// tileCodes with AVX-512, the same operations lane by lane.
__attribute__((target("avx512f"))) void tileCodes512(const float* R, const float* u, int64_t len, float inv,
                                                     float scale, bool zero, float L, int32_t* codes) {
  const __m512 invV = _mm512_set1_ps(inv), scaleV = _mm512_set1_ps(scale), hiV = _mm512_set1_ps(L),
               loV = _mm512_set1_ps(-L), two24 = _mm512_set1_ps(16777216.0f);
  const __m512i ones24 = _mm512_set1_epi32(16777215), off = _mm512_set1_epi32(static_cast<int32_t>(L));
  int64_t k = 0;
  for (; k + 16 <= len; k += 16) {
    __m512 y = _mm512_setzero_ps();
    if (!zero) {
      const __m512 r = _mm512_mul_ps(_mm512_loadu_ps(R + k), invV);
      y = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(r, scaleV), loV), hiV);
    }
    const __m512i yc = _mm512_cvt_roundps_epi32(_mm512_mul_ps(y, two24), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    const __m512i kbar = _mm512_sub_epi32(ones24, _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_loadu_ps(u + k), two24)));
    _mm512_storeu_si512(codes + k, _mm512_add_epi32(_mm512_srai_epi32(_mm512_add_epi32(yc, kbar), 24), off));
  }
  if (k < len) tileCodes(R + k, u + k, len - k, inv, scale, zero, L, codes + k);
}

// tileCodes with AVX2, the same operations lane by lane (ceil, then an exact
// conversion, for AVX-512's round-up conversion), and the noise drawn in
// registers instead of read from u: for coordinate first + k,
// uniform01Half's k = u·2^24 is the upper 24 bits of its half-word, so
// kbar = 2^24 − 1 − (half >> 8) without the float round trip. first even (the
// tile starts on a word) and len a multiple of 8.
__attribute__((target("avx2,fma,f16c"))) void tileCodes256(const float* R, uint64_t seed, uint64_t first, int64_t len,
                                                           float inv, float scale, bool zero, float L, int32_t* codes) {
  const __m256 invV = _mm256_set1_ps(inv), scaleV = _mm256_set1_ps(scale), hiV = _mm256_set1_ps(L),
               loV = _mm256_set1_ps(-L), two24 = _mm256_set1_ps(16777216.0f);
  const __m256i ones24 = _mm256_set1_epi32(16777215), off = _mm256_set1_epi32(static_cast<int32_t>(L));
  __m256i state = splitmix256::states(seed, first / 2);
  const __m256i step = splitmix256::step4();
  for (int64_t k = 0; k < len; k += 8) {
    __m256 y = _mm256_setzero_ps();
    if (!zero) {
      const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(R + k), invV);
      y = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(r, scaleV), loV), hiV);
    }
    const __m256i yc = _mm256_cvtps_epi32(_mm256_ceil_ps(_mm256_mul_ps(y, two24)));
    const __m256i kbar = _mm256_sub_epi32(ones24, _mm256_srli_epi32(splitmix256::finalise4(state), 8));
    state = _mm256_add_epi64(state, step);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + k),
                        _mm256_add_epi32(_mm256_srai_epi32(_mm256_add_epi32(yc, kbar), 24), off));
  }
}

// applyRandomSigns of x[lo, hi) into R (R[0] is coordinate lo) fused with
// squares(x, lo, hi, expMax) in the same pass and the same order (lane l of
// the two 4-double accumulators is squares' acc[l]; products of floats are
// exact in double, so only the additions round, as there), for the AVX2 tier.
// lo a multiple of 64.
__attribute__((target("avx2,fma"))) double signsSquares256(const float* x, int64_t lo, int64_t hi, uint64_t seed,
                                                           float* R, uint32_t* expMax) {
  const __m256i expMask = _mm256_set1_epi32(0x7F800000);
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  __m256i mx = _mm256_setzero_si256();
  uint64_t bits = 0;
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    if (i % 64 == 0) bits = randomBits(seed, static_cast<uint64_t>(i / 64));
    const __m256 v = _mm256_loadu_ps(x + i);
    mx = _mm256_max_epu32(mx, _mm256_and_si256(_mm256_castps_si256(v), expMask));
    const __m256d l4 = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), h4 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    a0 = _mm256_add_pd(a0, _mm256_mul_pd(l4, l4));
    a1 = _mm256_add_pd(a1, _mm256_mul_pd(h4, h4));
    _mm256_storeu_ps(R + (i - lo), _mm256_xor_ps(v, fwht::signs8(bits, i)));
  }
  alignas(32) double acc[8];
  alignas(32) uint32_t lanes[8];
  _mm256_store_pd(acc, a0);
  _mm256_store_pd(acc + 4, a1);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), mx);
  for (uint32_t l : lanes) *expMax = l > *expMax ? l : *expMax;
  if (i < hi) {  // squares' tail: into acc[0]
    applyRandomSigns(x + i, i, hi, seed, R + (i - lo));
    for (; i < hi; ++i) {
      uint32_t u;
      std::memcpy(&u, x + i, 4);
      *expMax = std::max(*expMax, u & 0x7F800000u);
      acc[0] += static_cast<double>(x[i]) * x[i];
    }
  }
  double sum = 0;
  for (double a : acc) sum += a;
  return sum;
}
#endif

// D·x[lo, hi) into R with squares(x, lo, hi, expMax): one pass on the AVX2
// tier, two elsewhere (the AVX-512 tier takes the block kernels).
double signsWithSquares(const float* x, int64_t lo, int64_t hi, uint64_t seed, float* R, uint32_t* expMax) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (simd::haveAvx2() && lo % 64 == 0) return signsSquares256(x, lo, hi, seed, R, expMax);
#endif
  applyRandomSigns(x + lo, lo, hi, seed, R);
  return squares(x, lo, hi, expMax);
}

// One tile of codes of coordinates [first, first + len) through the widest
// kernel the CPU has (simd::level()), with the noise uniform01Half(seed, ·)
// (written to u[0, len) where a kernel reads it from memory).
void tileCodesAny(const float* R, uint64_t seed, uint64_t first, int64_t len, float inv, float scale, bool zero,
                  float L, float* u, int32_t* codes) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (simd::haveAvx512()) {
    simd::uniform01HalfFill(seed, first, len, u);
    return tileCodes512(R, u, len, inv, scale, zero, L, codes);
  }
  if (simd::haveAvx2() && first % 2 == 0 && len % 8 == 0)
    return tileCodes256(R, seed, first, len, inv, scale, zero, L, codes);
#endif
  simd::uniform01HalfFill(seed, first, len, u);
  tileCodes(R, u, len, inv, scale, zero, L, codes);
}

bool byteWords(int fieldBits) { return fieldBits == 2 || fieldBits == 4 || fieldBits == 8; }

// B floats of `scratch` starting on a 64-byte boundary: the block kernels load
// and store it one 64-byte register at a time, and a vector's 16-byte
// alignment would split every one of those across two cache lines
// (experiments/results/compressors_log.md, "Kernel measurements").
float* alignedBlock(std::vector<float>& scratch, int64_t B) {
  scratch.resize(static_cast<size_t>(B) + 16);
  const auto p = reinterpret_cast<uintptr_t>(scratch.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t{63});
}

}  // namespace

bool blockNorms(const float* x, const RandomizedHadamard& rht, float* norms) {
  const int64_t d = rht.dim(), B = rht.blockSize();
  if (block512::supportsBlock(B)) {  // the summation order of rotateQuantizePack's fused norms
    bool finite = true;
    for (int64_t b = 0; b < rht.numBlocks(); ++b) {
      const double sq = block512::sumSquares(x + b * B, std::min(d, (b + 1) * B) - b * B, B);
      finite = finite && std::isfinite(sq);  // x² never overflows in double
      norms[b] = static_cast<float>(std::sqrt(sq));
    }
    return finite;
  }
  uint32_t expMax = 0;
  for (int64_t b = 0; b < rht.numBlocks(); ++b) {
    const int64_t lo = b * B, hi = std::min(d, lo + B);
    double sq = 0;
    if (hi > lo) sq = squares(x, lo, hi, &expMax);
    norms[b] = static_cast<float>(std::sqrt(sq));
  }
  return expMax != 0x7F800000u;
}

at::Tensor rotateQuantizePack(const float* x, const float* range, const RandomizedHadamard& rht, int bits,
                              int fieldBits, uint64_t sharedSeed, uint64_t seed, std::vector<float>& scratch,
                              at::Tensor& cache, NormsInPass* fused) {
  const int64_t d = rht.dim(), dp = rht.paddedDim(), B = rht.blockSize();
  const float L = static_cast<float>((1 << (bits - 1)) - 1);
  const float inv = rht.scale();  // RandomizedHadamard::forward's
  const int32_t Lf = (1 << (fieldBits - 1)) - 1;       // the field's own offset
  const int32_t shift = Lf - static_cast<int32_t>(L);  // codes are c + L; fields hold c + Lf
  float* R = alignedBlock(scratch, B);
  const bool fast = byteWords(fieldBits);
  at::Tensor words = fast ? simd::reusableBuffer(cache, SaturatingPackedSum::numWords(dp, fieldBits), at::kByte)
                          : at::Tensor();
  if (block512::supports(B, fieldBits)) {
    uint8_t* out = words.data_ptr<uint8_t>();
    uint64_t signs[4096 / 64];
    for (int64_t b = 0; b < rht.numBlocks(); ++b) {
      const int64_t lo = b * B;
      block512::signWords(sharedSeed, static_cast<uint64_t>(lo / 64), B / 64, signs);
      const double sq = block512::rotateGroups(x + lo, std::min(d, lo + B) - lo, signs, B, fused != nullptr, R);
      float m;
      if (fused) {  // blockNorms, then Thc::rangeOf
        const float norm = static_cast<float>(std::sqrt(sq));
        fused->norms[b] = norm;
        fused->finite = fused->finite && std::isfinite(sq);  // x² never overflows in double
        m = static_cast<float>(static_cast<double>(norm) * fused->rangeScale);
      } else {
        m = range[b];
      }
      block512::quantizeColumns(R, lo, B, inv, L / m, !(m > 0), L, Lf, fieldBits, seed, out + lo * fieldBits / 8);
    }
    return words;
  }
  uint32_t expMax = 0;  // of x, when the norms are computed here
  alignas(64) float u[kTile];
  alignas(64) int32_t codes[kTile];
  at::Tensor all = fast ? at::Tensor() : at::empty({dp}, at::kInt);
  for (int64_t b = 0; b < rht.numBlocks(); ++b) {
    const int64_t lo = b * B, hi = std::min(d, lo + B);
    // R = H·D·pad(x) on this block (D: bit i mod 64 of word i/64; zero padding).
    float m;
    if (fused) {  // blockNorms, then Thc::rangeOf
      const double sq = hi > lo ? signsWithSquares(x, lo, hi, sharedSeed, R, &expMax) : 0.0;
      fused->norms[b] = static_cast<float>(std::sqrt(sq));
      m = static_cast<float>(static_cast<double>(fused->norms[b]) * fused->rangeScale);
    } else {
      if (hi > lo) applyRandomSigns(x + lo, lo, hi, sharedSeed, R);  // D (Hadamard.h)
      m = range[b];
    }
    std::fill(R + std::max<int64_t>(hi - lo, 0), R + B, 0.0f);
    fwhtInPlace(R, B, B);
    const float scale = L / m;  // Thc::quantize: R·(L/m)
    for (int64_t t = 0; t < B; t += kTile) {
      const int64_t len = std::min(kTile, B - t);
      tileCodesAny(R + t, seed, static_cast<uint64_t>(lo + t), len, inv, scale, !(m > 0), L, u, codes);
      if (shift != 0)
        for (int64_t k = 0; k < len; ++k) codes[k] += shift;
      if (fast) {
        packBytes(codes, len, fieldBits, words.data_ptr<uint8_t>() + (lo + t) * fieldBits / 8);
      } else {
        int32_t* c = all.data_ptr<int32_t>() + lo + t;
        for (int64_t k = 0; k < len; ++k) c[k] = codes[k] - Lf;  // signed, as SaturatingPackedSum::pack takes
      }
    }
  }
  if (fused) fused->finite = expMax != 0x7F800000u;
  return fast ? words : SaturatingPackedSum::pack(all, fieldBits);
}

at::Tensor unpackInverse(const at::Tensor& wordsIn, const float* range, const RandomizedHadamard& rht, int bits,
                         int fieldBits, int n, uint64_t sharedSeed, std::vector<float>& scratch, at::Tensor& cache) {
  const int64_t d = rht.dim(), dp = rht.paddedDim(), B = rht.blockSize();
  const float L = static_cast<float>((1 << (bits - 1)) - 1);
  const int32_t Lf = (1 << (fieldBits - 1)) - 1;
  float* y = alignedBlock(scratch, B);
  const at::Tensor words = wordsIn.cpu().contiguous();
  at::Tensor sums;
  if (!byteWords(fieldBits)) sums = SaturatingPackedSum::unpack(words, fieldBits, dp);
  at::Tensor out = simd::reusableBuffer(cache, d, at::kFloat);
  const float inv = rht.scale();
  if (block512::supports(B, fieldBits)) {
    const uint8_t* in = words.data_ptr<uint8_t>();
    float* o = out.data_ptr<float>();
    uint64_t signs[4096 / 64];
    for (int64_t b = 0; b < rht.numBlocks() && b * B < d; ++b) {
      const int64_t lo = b * B;
      block512::signWords(sharedSeed, static_cast<uint64_t>(lo / 64), B / 64, signs);
      block512::dequantizeGroups(in + lo * fieldBits / 8, B, fieldBits, Lf, static_cast<float>(n), range[b] / L, y);
      block512::inverseColumns(y, std::min(d, lo + B) - lo, signs, B, inv, o + lo);
    }
    return out;
  }
  for (int64_t b = 0; b < rht.numBlocks() && b * B < d; ++b) {
    const float ml = range[b] / L;  // Thc::dequantizeSum: (s/n)·(M/L)
    if (byteWords(fieldBits)) {
      unpackBytes(words.data_ptr<uint8_t>() + b * B * fieldBits / 8, B, fieldBits, Lf, static_cast<float>(n), ml, y);
    } else {
      const int32_t* s = sums.data_ptr<int32_t>() + b * B;
      for (int64_t k = 0; k < B; ++k) y[k] = (static_cast<float>(s[k]) / static_cast<float>(n)) * ml;
    }
    fwhtInPlace(y, B, B);
    // RandomizedHadamard::inverse: the 1/sqrt(B) scale, then D; padding dropped.
    const int64_t lo = b * B;
    applyRandomSigns(y, lo, std::min(d, lo + B), sharedSeed, out.data_ptr<float>() + lo, inv);
  }
  return out;
}

}  // namespace gradzip::compress::thc
