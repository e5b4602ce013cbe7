// Implements compress/SimdKernels.h. The fp16 casts use the F16C / AVX-512
// conversion instructions through intrinsics because GCC 12 does not vectorise
// _Float16 conversions (it emits one scalar vcvtps2ph per element); everything
// else is plain loops that GCC vectorises at -O3 for each target_clones target.
// The finiteness test looks only at the exponent field: x is non-finite iff
// (bits(x) & 0x7F800000) == 0x7F800000, so a running unsigned max of that field
// over the vector decides it without a branch in the loop.
#include "compress/SimdKernels.h"

#include "compress/CounterRng.h"

#include <algorithm>
#include <bit>
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
  const uint32_t t = toHalfScalar(x + i, div, out + i, n - i);
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
  fromHalfScalar(in + i, mul, out + i, n - i);
}

__attribute__((target("avx2,f16c"))) uint32_t toHalf256(const float* x, float div, c10::Half* out, int64_t n) {
  const __m256i expMask = _mm256_set1_epi32(static_cast<int>(kExp));
  const __m256 dv = _mm256_set1_ps(div);
  __m256i mx = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    mx = _mm256_max_epu32(mx, _mm256_and_si256(_mm256_castps_si256(v), expMask));
    if (div != 1.0f) v = _mm256_div_ps(v, dv);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), mx);
  uint32_t m = toHalfScalar(x + i, div, out + i, n - i);
  for (uint32_t l : lanes) m = l > m ? l : m;
  return m;
}

__attribute__((target("avx2,f16c"))) void fromHalf256(const c10::Half* in, float mul, float* out, int64_t n) {
  const __m256 mv = _mm256_set1_ps(mul);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    if (mul != 1.0f) v = _mm256_mul_ps(v, mv);
    _mm256_storeu_ps(out + i, v);
  }
  fromHalfScalar(in + i, mul, out + i, n - i);
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
      s += x[i] * x[i];
    }
    sq[full] = s;
  }
  return m;
}

// bf16 -> float (a 16-bit shift), with non-temporal stores for large outputs.
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
  fromBf16(in + i, mul, out + i, n - i);
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

int halfLevel() {
  static const int level = __builtin_cpu_supports("avx512f")                       ? 2
                           : (__builtin_cpu_supports("avx2") && haveF16c()) ? 1
                                                                            : 0;
  return level;
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
  const __m512i gamma = _mm512_set1_epi64(static_cast<long long>(0x9e3779b97f4a7c15ULL));
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ULL));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebULL));
  // splitmix64 states seed + (w + 1)·γ of words w = (first + k)/2 + 0..7,
  // advanced by 8γ per step (no multiply for the counter; the same words as
  // randomBits); the 16 x 32-bit view of 8 words is 16 consecutive halves.
  const uint64_t w0 = (first + static_cast<uint64_t>(k)) / 2;
  alignas(64) uint64_t start[8];
  for (int l = 0; l < 8; ++l) start[l] = seed + (w0 + static_cast<uint64_t>(l) + 1) * 0x9e3779b97f4a7c15ULL;
  __m512i state = _mm512_load_si512(start);
  const __m512i step8 = _mm512_slli_epi64(gamma, 3);
  const __m512 scale = _mm512_set1_ps(1.0f / 16777216.0f);
  for (; k + 16 <= n; k += 16) {
    __m512i z = state;
    state = _mm512_add_epi64(state, step8);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
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

bool haveAvx512() {
#if GZ_X86
  static const bool v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return v;
#else
  return false;
#endif
}

void uniform01HalfFill(uint64_t seed, uint64_t first, int64_t n, float* out) {
#if GZ_X86
  if (haveAvx512()) return detail::uniformHalf512(seed, first, n, out);
#endif
  for (int64_t k = 0; k < n; ++k) out[k] = uniform01Half(seed, first + static_cast<uint64_t>(k));
}

bool chunkSquaredNorms(const float* x, int64_t d, int64_t C, float* sq) {
#if GZ_X86
  if (C % 16 == 0 && detail::halfLevel() == 2) return detail::chunkSq512(x, d, C, sq) != detail::kExp;
#endif
  return detail::chunkSqScalar(x, d, C, sq) != detail::kExp;
}

bool allFinite(const float* x, int64_t n) { return detail::maxExponentField(x, n) != detail::kExp; }

bool copyFinite(const float* x, float* out, int64_t n) { return detail::copyMaxExponent(x, out, n) != detail::kExp; }

bool floatToHalf(const float* x, float div, c10::Half* out, int64_t n) {
#if GZ_X86
  switch (detail::halfLevel()) {
    case 2: return detail::toHalf512(x, div, out, n) != detail::kExp;
    case 1: return detail::toHalf256(x, div, out, n) != detail::kExp;
    default: break;
  }
#endif
  return detail::toHalfScalar(x, div, out, n) != detail::kExp;
}

void halfToFloat(const c10::Half* in, float mul, float* out, int64_t n) {
#if GZ_X86
  switch (detail::halfLevel()) {
    case 2: return detail::fromHalf512(in, mul, out, n);
    case 1: return detail::fromHalf256(in, mul, out, n);
    default: break;
  }
#endif
  detail::fromHalfScalar(in, mul, out, n);
}

bool floatToBf16(const float* x, float div, c10::BFloat16* out, int64_t n) {
  return detail::toBf16(x, div, reinterpret_cast<uint16_t*>(out), n) != detail::kExp;
}

void bf16ToFloat(const c10::BFloat16* in, float mul, float* out, int64_t n) {
#if GZ_X86
  if (haveAvx512()) return detail::fromBf16_512(reinterpret_cast<const uint16_t*>(in), mul, out, n);
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
