// Implements compress/kernels/SimdKernels.h. The fp16 casts use the F16C / AVX-512
// conversion instructions through intrinsics because GCC 12 does not vectorise
// _Float16 conversions (it emits one scalar vcvtps2ph per element); the bf16
// casts, chunk norms and the uniform stream have AVX-512 and AVX2 intrinsic
// paths (the AVX2 ones for CPUs without AVX-512, where the portable loops are
// several times slower: experiments/results/compressors_portable.md against
// compressors_avx2.md); everything else
// is plain loops that GCC vectorises at -O3 for each target_clones target.
// The finiteness test looks only at the exponent field: x is non-finite iff
// (bits(x) & 0x7F800000) == 0x7F800000, so a running unsigned max of that field
// over the vector decides it without a branch in the loop.
#include "compress/kernels/SimdKernels.h"

#include "compress/kernels/CounterRng.h"
#include "compress/kernels/Splitmix256.h"
#include "compress/kernels/Splitmix512.h"
#include "util/Error.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define GZ_X86 1
#define GZ_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GZ_X86 0
#define GZ_CLONES
#endif

namespace gradzip::compress::simd {
namespace detail {

constexpr uint32_t kExp = 0x7F800000u;

inline uint32_t bitsOf(float v) { return std::bit_cast<uint32_t>(v); }

GZ_CLONES uint32_t maxExponentField(const float* x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const uint32_t e = u & kExp;
    m = e > m ? e : m;
  }
  return m;
}

GZ_CLONES uint32_t copyMaxExponent(const float* __restrict x, float* __restrict out, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const uint32_t e = u & kExp;
    m = e > m ? e : m;
    out[i] = x[i];
  }
  return m;
}

// c10::BFloat16's round_to_nearest_even without its NaN branch (NaN inputs are
// rejected by the caller; Inf maps to Inf by the same formula).
GZ_CLONES uint32_t toBf16(const float* __restrict x, float div, uint16_t* __restrict out, int64_t n) {
  uint32_t m = 0;
  if (div == 1.0f) {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, x + i, 4);
      const uint32_t e = u & kExp;
      m = e > m ? e : m;
      out[i] = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, x + i, 4);
      const uint32_t e = u & kExp;
      m = e > m ? e : m;
      const float v = x[i] / div;
      uint32_t w;
      std::memcpy(&w, &v, 4);
      out[i] = static_cast<uint16_t>((w + 0x7FFFu + ((w >> 16) & 1u)) >> 16);
    }
  }
  return m;
}

GZ_CLONES void fromBf16(const uint16_t* __restrict in, float mul, float* __restrict out, int64_t n) {
  if (mul == 1.0f) {
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = static_cast<uint32_t>(in[i]) << 16;
      std::memcpy(out + i, &u, 4);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = static_cast<uint32_t>(in[i]) << 16;
      float v;
      std::memcpy(&v, &u, 4);
      out[i] = v * mul;
    }
  }
}

uint32_t toHalfScalar(const float* x, float div, c10::Half* out, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t e = bitsOf(x[i]) & kExp;
    m = e > m ? e : m;
    out[i] = c10::Half(div == 1.0f ? x[i] : x[i] / div);
  }
  return m;
}

void fromHalfScalar(const c10::Half* in, float mul, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = mul == 1.0f ? static_cast<float>(in[i]) : static_cast<float>(in[i]) * mul;
}

#if GZ_X86
__attribute__((target("avx512f"))) uint32_t toHalf512(const float* x, float div, c10::Half* out, int64_t n) {
  const __m512i expMask = _mm512_set1_epi32(static_cast<int>(kExp));
  const __m512 dv = _mm512_set1_ps(div);
  __m512i mx = _mm512_setzero_si512();
  int64_t i = 0;
  if (div == 1.0f) {
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_castps_si512(v), expMask));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
  } else {
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_castps_si512(v), expMask));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm512_cvtps_ph(_mm512_div_ps(v, dv), _MM_FROUND_TO_NEAREST_INT));
    }
  }
  const uint32_t m = _mm512_reduce_max_epu32(mx);
  const uint32_t t = i < n ? toHalfScalar(x + i, div, out + i, n - i) : 0;
  return m > t ? m : t;
}

__attribute__((target("avx512f"))) void fromHalf512(const c10::Half* in, float mul, float* out, int64_t n) {
  const __m512 mv = _mm512_set1_ps(mul);
  int64_t i = 0;
  if (mul == 1.0f && n * 4 >= kStreamBytes && reinterpret_cast<uintptr_t>(out) % 64 == 0) {
    for (; i + 16 <= n; i += 16)
      _mm512_stream_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
    _mm_sfence();
  } else if (mul == 1.0f) {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
  } else {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(
                                                   reinterpret_cast<const __m256i*>(in + i))),
                                               mv));
  }
  if (i < n) fromHalfScalar(in + i, mul, out + i, n - i);
}

__attribute__((target("avx2,f16c"))) uint32_t toHalf256(const float* x, float div, c10::Half* out, int64_t n) {
  const __m256i expMask = _mm256_set1_epi32(static_cast<int>(kExp));
  const __m256 dv = _mm256_set1_ps(div);
  __m256i mx = _mm256_setzero_si256();
  int64_t i = 0;
#pragma GCC unroll 4
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    mx = _mm256_max_epu32(mx, _mm256_and_si256(_mm256_castps_si256(v), expMask));
    if (div != 1.0f) v = _mm256_div_ps(v, dv);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), mx);
  uint32_t m = i < n ? toHalfScalar(x + i, div, out + i, n - i) : 0;
  for (uint32_t l : lanes) m = l > m ? l : m;
  return m;
}

__attribute__((target("avx2,f16c"))) void fromHalf256(const c10::Half* in, float mul, float* out, int64_t n) {
  const __m256 mv = _mm256_set1_ps(mul);
  int64_t i = 0;
#pragma GCC unroll 4
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    if (mul != 1.0f) v = _mm256_mul_ps(v, mv);
    _mm256_storeu_ps(out + i, v);
  }
  if (i < n) fromHalfScalar(in + i, mul, out + i, n - i);
}

// toBf16's rounding of eight floats' bits w to bfloat16 bits (in 32-bit lanes).
__attribute__((target("avx2"), always_inline)) inline __m256i bf16Bits256(__m256i w) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(w, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(w, _mm256_set1_epi32(0x7FFF)), lsb), 16);
}

// toBf16 with AVX2, 16 floats per step (two saturating-pack halves put back
// in order by one 64-bit lane permutation); the same bits.
__attribute__((target("avx2"))) uint32_t toBf16_256(const float* x, float div, uint16_t* out, int64_t n) {
  const __m256i expMask = _mm256_set1_epi32(static_cast<int>(kExp));
  const __m256 dv = _mm256_set1_ps(div);
  __m256i mx = _mm256_setzero_si256();
  int64_t i = 0;
#pragma GCC unroll 2
  for (; i + 16 <= n; i += 16) {
    __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    mx = _mm256_max_epu32(mx, _mm256_and_si256(_mm256_castps_si256(a), expMask));
    mx = _mm256_max_epu32(mx, _mm256_and_si256(_mm256_castps_si256(b), expMask));
    if (div != 1.0f) {
      a = _mm256_div_ps(a, dv);
      b = _mm256_div_ps(b, dv);
    }
    const __m256i p = _mm256_packus_epi32(bf16Bits256(_mm256_castps_si256(a)), bf16Bits256(_mm256_castps_si256(b)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permute4x64_epi64(p, 0xD8));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), mx);
  uint32_t m = i < n ? toBf16(x + i, div, out + i, n - i) : 0;
  for (uint32_t l : lanes) m = l > m ? l : m;
  return m;
}

// bf16 -> float with AVX2 (a 16-bit shift), non-temporal stores for large outputs.
__attribute__((target("avx2"))) void fromBf16_256(const uint16_t* in, float mul, float* out, int64_t n) {
  const bool stream = n * 4 >= kStreamBytes && reinterpret_cast<uintptr_t>(out) % 32 == 0;
  const __m256 mv = _mm256_set1_ps(mul);
  int64_t i = 0;
#pragma GCC unroll 4
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))), 16);
    __m256 v = _mm256_castsi256_ps(w);
    if (mul != 1.0f) v = _mm256_mul_ps(v, mv);
    if (stream)
      _mm256_stream_ps(out + i, v);
    else
      _mm256_storeu_ps(out + i, v);
  }
  if (stream) _mm_sfence();
  if (i < n) fromBf16(in + i, mul, out + i, n - i);
}

__attribute__((target("avx512f"))) __m512 reduce16(const __m512* a);

__attribute__((target("avx512f"))) uint32_t chunkSq512(const float* x, int64_t d, int64_t C, float* sq) {
  const __m512i expMask = _mm512_set1_epi32(static_cast<int>(kExp));
  __m512i mx = _mm512_setzero_si512();
  const int64_t full = d / C;  // whole chunks; C is a multiple of 16 here
  int64_t c0 = 0;
  for (; c0 + 16 <= full; c0 += 16) {
    __m512 acc[16];
    for (int k = 0; k < 16; ++k) {
      const float* p = x + (c0 + k) * C;
      __m512 a = _mm512_setzero_ps();
      for (int64_t i = 0; i < C; i += 16) {
        const __m512 v = _mm512_loadu_ps(p + i);
        mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_castps_si512(v), expMask));
        a = _mm512_fmadd_ps(v, v, a);
      }
      acc[k] = a;
    }
    _mm512_storeu_ps(sq + c0, reduce16(acc));
  }
  for (int64_t c = c0; c < full; ++c) {
    const float* p = x + c * C;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < C; i += 16) {
      const __m512 v = _mm512_loadu_ps(p + i);
      mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_castps_si512(v), expMask));
      acc = _mm512_fmadd_ps(v, v, acc);
    }
    sq[c] = _mm512_reduce_add_ps(acc);
  }
  uint32_t m = _mm512_reduce_max_epu32(mx);
  if (full * C < d) {
    float s = 0;
    for (int64_t i = full * C; i < d; ++i) {
      const uint32_t e = bitsOf(x[i]) & kExp;
      m = e > m ? e : m;
      s = std::fma(x[i], x[i], s);  // one explicit FMA chain: its roundings do not depend on how the compiler vectorises
    }
    sq[full] = s;
  }
  return m;
}

// bf16 -> float (a 16-bit shift), with non-temporal stores for large outputs.
// toBf16 with AVX-512 BF16's rounding instruction (round to nearest even, as
// toBf16), 32 floats per step. It treats subnormal inputs as zero, so a step
// with any value in (0, 2^-126) in magnitude (after the division) is coded by
// toBf16's integer rounding instead; the same bits either way.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) uint32_t toBf16_512(const float* x, float div, uint16_t* out,
                                                                           int64_t n) {
  const __m512i expMask = _mm512_set1_epi32(static_cast<int>(kExp));
  const __m512i absMask = _mm512_set1_epi32(0x7FFFFFFF), one = _mm512_set1_epi32(1);
  const __m512i maxSub = _mm512_set1_epi32(0x7FFFFE);  // |bits| − 1 <= this: a subnormal
  const __m512 dv = _mm512_set1_ps(div);
  __m512i mx = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_castps_si512(a), expMask));
    mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_castps_si512(b), expMask));
    if (div != 1.0f) {
      a = _mm512_div_ps(a, dv);
      b = _mm512_div_ps(b, dv);
    }
    const __mmask16 subA = _mm512_cmple_epu32_mask(
        _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(a), absMask), one), maxSub);
    const __mmask16 subB = _mm512_cmple_epu32_mask(
        _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(b), absMask), one), maxSub);
    if (__builtin_expect((subA | subB) != 0, 0)) {
      toBf16(x + i, div, out + i, 32);  // its exponent maximum is already in mx
      continue;
    }
    _mm512_storeu_si512(out + i, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a)));  // a's 16 first
  }
  uint32_t m = i < n ? toBf16(x + i, div, out + i, n - i) : 0;
  const uint32_t v = _mm512_reduce_max_epu32(mx);
  return v > m ? v : m;
}

__attribute__((target("avx512f,avx512bw"))) void fromBf16_512(const uint16_t* in, float mul, float* out, int64_t n) {
  const bool stream = n * 4 >= kStreamBytes && reinterpret_cast<uintptr_t>(out) % 64 == 0;
  const __m512 mv = _mm512_set1_ps(mul);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))), 16);
    __m512 v = _mm512_castsi512_ps(w);
    if (mul != 1.0f) v = _mm512_mul_ps(v, mv);
    if (stream)
      _mm512_stream_ps(out + i, v);
    else
      _mm512_storeu_ps(out + i, v);
  }
  if (stream) _mm_sfence();
  if (i < n) fromBf16(in + i, mul, out + i, n - i);
}

// Sums of 16 chunk accumulators, one per lane (a transpose-reduce tree: four
// levels of shuffles and adds instead of 16 horizontal reductions).
__attribute__((target("avx512f"))) __m512 reduce16(const __m512* a) {
  __m512 x[8], y[4], z[2];
  for (int k = 0; k < 8; ++k) {  // [A lo + A hi | B lo + B hi] in 256-bit halves
    const __m512 p = a[2 * k], q = a[2 * k + 1];
    x[k] = _mm512_add_ps(_mm512_shuffle_f32x4(p, q, 0x44), _mm512_shuffle_f32x4(p, q, 0xEE));
  }
  for (int k = 0; k < 4; ++k)  // four 4-lane partial sums per vector, one per chunk
    y[k] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], 0x88),
                         _mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], 0xDD));
  for (int k = 0; k < 2; ++k)
    z[k] = _mm512_add_ps(_mm512_shuffle_ps(y[2 * k], y[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(y[2 * k], y[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 w = _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // w holds chunks in the order 0,4,8,12, 1,5,9,13, 2,6,10,14, 3,7,11,15.
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(order, w);
}

// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does
// not know the "f16c" feature string.
bool haveF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

// Σ p[i]² over one chunk of C floats (C a multiple of 16) in two 8-lane
// accumulators (lanes i mod 16, as chunkSqScalar's), added lane by lane, and the
// exponent-field maximum into *mx.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 chunkSum256(const float* p, int64_t C, __m256i* mx) {
  const __m256i expMask = _mm256_set1_epi32(static_cast<int>(kExp));
  __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
  for (int64_t i = 0; i < C; i += 16) {
    const __m256 u = _mm256_loadu_ps(p + i), v = _mm256_loadu_ps(p + i + 8);
    *mx = _mm256_max_epu32(*mx, _mm256_and_si256(_mm256_castps_si256(u), expMask));
    *mx = _mm256_max_epu32(*mx, _mm256_and_si256(_mm256_castps_si256(v), expMask));
    a = _mm256_fmadd_ps(u, u, a);
    b = _mm256_fmadd_ps(v, v, b);
  }
  return _mm256_add_ps(a, b);
}

// chunkSq512 with AVX2: eight chunks' sums at once by a horizontal-add tree.
__attribute__((target("avx2,fma"))) uint32_t chunkSq256(const float* x, int64_t d, int64_t C, float* sq) {
  __m256i mx = _mm256_setzero_si256();
  const int64_t full = d / C;  // whole chunks; C is a multiple of 16 here
  int64_t c0 = 0;
  for (; c0 + 8 <= full; c0 += 8) {
    __m256 s[8];
    for (int k = 0; k < 8; ++k) s[k] = chunkSum256(x + (c0 + k) * C, C, &mx);
    const __m256 h01 = _mm256_hadd_ps(s[0], s[1]), h23 = _mm256_hadd_ps(s[2], s[3]);
    const __m256 h45 = _mm256_hadd_ps(s[4], s[5]), h67 = _mm256_hadd_ps(s[6], s[7]);
    const __m256 lo = _mm256_hadd_ps(h01, h23), hi = _mm256_hadd_ps(h45, h67);  // per 128-bit half
    _mm256_storeu_ps(sq + c0, _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31)));
  }
  for (int64_t c = c0; c < full; ++c) {
    alignas(32) float l[8];
    _mm256_store_ps(l, chunkSum256(x + c * C, C, &mx));
    sq[c] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), mx);
  uint32_t m = 0;
  for (uint32_t v : lanes) m = v > m ? v : m;
  if (full * C < d) {
    float s = 0;
    for (int64_t i = full * C; i < d; ++i) {
      const uint32_t e = bitsOf(x[i]) & kExp;
      m = e > m ? e : m;
      s = std::fma(x[i], x[i], s);  // one explicit FMA chain: its roundings do not depend on how the compiler vectorises
    }
    sq[full] = s;
  }
  return m;
}

// uniformHalf512 with AVX2: four splitmix64 words (eight numbers) per step.
__attribute__((target("avx2,fma,f16c"))) void uniformHalf256(uint64_t seed, uint64_t first, int64_t n, float* out) {
  int64_t k = 0;
  if (n > 0 && first % 2 == 1) {  // start on a word boundary
    out[0] = uniform01Half(seed, first);
    k = 1;
  }
  __m256i state = splitmix256::states(seed, (first + static_cast<uint64_t>(k)) / 2);
  const __m256i step = splitmix256::step4();
  const __m256 scale = _mm256_set1_ps(1.0f / 16777216.0f);
  for (; k + 8 <= n; k += 8) {
    const __m256i z = splitmix256::finalise4(state);
    state = _mm256_add_epi64(state, step);
    _mm256_storeu_ps(out + k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(z, 8)), scale));
  }
  for (; k < n; ++k) out[k] = uniform01Half(seed, first + static_cast<uint64_t>(k));
}
#endif

#if GZ_X86
__attribute__((target("avx512f,avx512dq"))) void uniformHalf512(uint64_t seed, uint64_t first, int64_t n,
                                                                  float* out) {
  int64_t k = 0;
  if (n > 0 && first % 2 == 1) {  // start on a word boundary
    out[0] = uniform01Half(seed, first);
    k = 1;
  }
  // splitmix64 states of words w = (first + k)/2 + 0..7, advanced by 8 words
  // per step (no multiply for the counter; the same words as randomBits); the
  // 16 x 32-bit view of 8 words is 16 consecutive halves.
  __m512i state = splitmix512::states8(seed, (first + static_cast<uint64_t>(k)) / 2);
  const __m512i step8 = splitmix512::advance(8);
  const __m512 scale = _mm512_set1_ps(1.0f / 16777216.0f);
  for (; k + 16 <= n; k += 16) {
    const __m512i z = splitmix512::finalise8(state);
    state = _mm512_add_epi64(state, step8);
    _mm512_storeu_ps(out + k, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(z, 8)), scale));
  }
  for (; k < n; ++k) out[k] = uniform01Half(seed, first + static_cast<uint64_t>(k));
}
#endif

// Scalar chunk norms (any C; 16 partial sums per chunk).
uint32_t chunkSqScalar(const float* x, int64_t d, int64_t C, float* sq) {
  uint32_t m = 0;
  const int64_t nc = (d + C - 1) / C;
  for (int64_t c = 0; c < nc; ++c) {
    const float* p = x + c * C;
    const int64_t len = std::min(C, d - c * C);
    float acc[16] = {};
    for (int64_t i = 0; i < len; ++i) {
      const uint32_t e = bitsOf(p[i]) & kExp;
      m = e > m ? e : m;
      acc[i & 15] += p[i] * p[i];
    }
    float s = 0;
    for (float a : acc) s += a;
    sq[c] = s;
  }
  return m;
}

}  // namespace detail

Level cpuLevel() {
#if GZ_X86
  static const Level l = (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          detail::haveF16c())
                             ? Level::kAvx512
                         : (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && detail::haveF16c())
                             ? Level::kAvx2
                             : Level::kPortable;
  return l;
#else
  return Level::kPortable;
#endif
}

namespace {
std::atomic<int> gCap{static_cast<int>(Level::kAvx512)};
}  // namespace

Level level() { return static_cast<Level>(std::min(static_cast<int>(cpuLevel()), gCap.load(std::memory_order_relaxed))); }

Level capLevel(Level cap) { return static_cast<Level>(gCap.exchange(static_cast<int>(cap))); }

const char* levelName(Level l) {
  switch (l) {
    case Level::kAvx512: return "avx512";
    case Level::kAvx2: return "avx2";
    default: return "portable";
  }
}

Level parseLevel(const std::string& name) {
  for (Level l : {Level::kPortable, Level::kAvx2, Level::kAvx512})
    if (name == levelName(l)) return l;
  GZ_CHECK(false, "unknown SIMD level '{}' (expected portable, avx2 or avx512)", name);
  return Level::kPortable;
}

bool haveAvx512() { return level() == Level::kAvx512; }

namespace {
// AVX-512 BF16 (vcvtne2ps2bf16), for floatToBf16 on the AVX-512 tier.
bool haveAvx512Bf16() {
#if GZ_X86
  static const bool v = __builtin_cpu_supports("avx512bf16");
  return v;
#else
  return false;
#endif
}
}  // namespace
bool haveAvx2() { return level() >= Level::kAvx2; }

void uniform01HalfFill(uint64_t seed, uint64_t first, int64_t n, float* out) {
#if GZ_X86
  if (haveAvx512()) return detail::uniformHalf512(seed, first, n, out);
  if (haveAvx2()) return detail::uniformHalf256(seed, first, n, out);
#endif
  for (int64_t k = 0; k < n; ++k) out[k] = uniform01Half(seed, first + static_cast<uint64_t>(k));
}

bool chunkSquaredNorms(const float* x, int64_t d, int64_t C, float* sq) {
#if GZ_X86
  if (C % 16 == 0 && haveAvx512()) return detail::chunkSq512(x, d, C, sq) != detail::kExp;
  if (C % 16 == 0 && haveAvx2()) return detail::chunkSq256(x, d, C, sq) != detail::kExp;
#endif
  return detail::chunkSqScalar(x, d, C, sq) != detail::kExp;
}

bool allFinite(const float* x, int64_t n) { return detail::maxExponentField(x, n) != detail::kExp; }

bool copyFinite(const float* x, float* out, int64_t n) { return detail::copyMaxExponent(x, out, n) != detail::kExp; }

bool floatToHalf(const float* x, float div, c10::Half* out, int64_t n) {
#if GZ_X86
  switch (static_cast<int>(level())) {
    case 2: return detail::toHalf512(x, div, out, n) != detail::kExp;
    case 1: return detail::toHalf256(x, div, out, n) != detail::kExp;
    default: break;
  }
#endif
  return detail::toHalfScalar(x, div, out, n) != detail::kExp;
}

void halfToFloat(const c10::Half* in, float mul, float* out, int64_t n) {
#if GZ_X86
  switch (static_cast<int>(level())) {
    case 2: return detail::fromHalf512(in, mul, out, n);
    case 1: return detail::fromHalf256(in, mul, out, n);
    default: break;
  }
#endif
  detail::fromHalfScalar(in, mul, out, n);
}

bool floatToBf16(const float* x, float div, c10::BFloat16* out, int64_t n) {
#if GZ_X86
  if (haveAvx512() && haveAvx512Bf16())
    return detail::toBf16_512(x, div, reinterpret_cast<uint16_t*>(out), n) != detail::kExp;
  if (haveAvx2()) return detail::toBf16_256(x, div, reinterpret_cast<uint16_t*>(out), n) != detail::kExp;
#endif
  return detail::toBf16(x, div, reinterpret_cast<uint16_t*>(out), n) != detail::kExp;
}

void bf16ToFloat(const c10::BFloat16* in, float mul, float* out, int64_t n) {
#if GZ_X86
  if (haveAvx512()) return detail::fromBf16_512(reinterpret_cast<const uint16_t*>(in), mul, out, n);
  if (haveAvx2()) return detail::fromBf16_256(reinterpret_cast<const uint16_t*>(in), mul, out, n);
#endif
  detail::fromBf16(reinterpret_cast<const uint16_t*>(in), mul, out, n);
}

at::Tensor reusableBuffer(at::Tensor& cache, int64_t n, at::ScalarType dtype) {
  if (cache.defined() && cache.use_count() == 1 && cache.storage().use_count() == 1 && cache.numel() == n &&
      cache.scalar_type() == dtype)
    return cache;
  cache = at::empty({n}, at::TensorOptions().dtype(dtype));
  return cache;
}

}  // namespace gradzip::compress::simd
