// Implements compress/kernels/NaturalKernels.h: the portable loops (the decoder
// branch-free, so GCC vectorises it for each target_clones target; the
// encoder draws one noise block per 4 coordinates), the AVX-512 and AVX2
// decoders and the run-time dispatch; the encoders are in
// NaturalEncoder512.cpp and NaturalEncoder256.cpp.
// The VBMI decoder reads the two non-zero bytes of each float from byte tables;
// without VBMI a shift-and-mask decoder takes 16 codes per step.
#include "compress/kernels/NaturalKernels.h"

#include "compress/NaturalCompression.h"
#include "compress/kernels/AesNoise.h"
#include "compress/kernels/NaturalKernelsDetail.h"
#include "compress/kernels/SimdKernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>

namespace gradzip::compress::nat {

#if defined(__x86_64__) && defined(__GNUC__)
#define GZ_NAT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GZ_NAT_CLONES
#endif

namespace detail {

int64_t encodeLoop(const float* __restrict x, int64_t n, uint64_t seed, uint64_t first, bool stochastic,
                   uint8_t* __restrict out, uint32_t* expMax) {
  constexpr uint32_t kLowestBits = static_cast<uint32_t>(kNatMinExp + 127) << 23;  // bits of 2^-50
  const float lowest = std::ldexp(1.0f, kNatMinExp);
  int64_t clipped = 0;
  uint32_t mx = 0;
  aesnoise::Block noise{0, 0};  // the noise block of coordinate first + i, drawn once per 4 coordinates
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const uint32_t ef = u & 0x7F800000u;
    mx = ef > mx ? ef : mx;
    const uint64_t c = first + static_cast<uint64_t>(i);
    if (i == 0 || c % 4 == 0) noise = aesnoise::block(seed, c / 4);
    const uint64_t rnd = aesnoise::wordOf(noise, c);
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7FFFFFFFu;
    // Definition 1 on the bits: (|t| + r) & 0xFF800000, r uniform in [0, 2^23)
    // (2^22: nearest power of two). Its exponent field minus 127 is e.
    const uint32_t r = stochastic ? static_cast<uint32_t>(rnd) & 0x7FFFFFu : 0x400000u;
    const int32_t e = static_cast<int32_t>((a + r) >> 23) - 127;
    const int32_t big = e > kNatMaxExp;
    clipped += big;
    const uint32_t normal = sign | 0x40u | static_cast<uint32_t>((big ? kNatMaxExp : e) - kNatMinExp);
    // Below 2^-50: 2^-50 with probability |t|/2^-50 (nearer of 0, 2^-50 when deterministic).
    float av;
    std::memcpy(&av, &a, 4);
    const float uf = static_cast<float>(rnd & 0x7FFFFF) * (1.0f / 8388608.0f);
    const bool up = stochastic ? uf * lowest < av : 2 * av >= lowest;
    const uint32_t tiny = up ? (sign | 0x40u) : 0u;
    out[i] = static_cast<uint8_t>(a < kLowestBits ? tiny : normal);
  }
  *expMax = mx > *expMax ? mx : *expMax;
  return clipped;
}

}  // namespace detail

namespace {

// naturalDecode for codes[0, n): ±2^((c & 0x3F) − 50), or 0 without the non-zero flag.
GZ_NAT_CLONES void decodeLoop(const uint8_t* __restrict codes, int64_t n, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t c = codes[i];
    const uint32_t bits = ((c & 0x80u) << 24) | (((c & 0x3Fu) + static_cast<uint32_t>(kNatMinExp + 127)) << 23);
    const uint32_t v = (c & 0x40u) ? bits : 0u;
    std::memcpy(out + i, &v, 4);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define GZ_NAT_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))

// decodeLoop with AVX-512: for a code c with the flag set, (c & 0x7F) + 13 is
// the exponent field e + 127 (<= 140, eight bits), and adding c & 0x80 to c
// moves the sign from bit 7 to bit 8, so ((c + (c & 0x80) + 13) << 23) is the
// float; codes without the flag are 0 (a masked shift).
GZ_NAT_AVX512 void decode512(const uint8_t* codes, int64_t n, float* out) {
  const int64_t body = n / 16 * 16;
  const __m512i signBit = _mm512_set1_epi32(0x80), flag = _mm512_set1_epi32(0x40);
  const __m512i bias = _mm512_set1_epi32(127 + kNatMinExp - 0x40);
  // Large outputs: non-temporal stores (simd::kStreamBytes).
  const bool stream = n * 4 >= simd::kStreamBytes && reinterpret_cast<uintptr_t>(out) % 64 == 0;
  for (int64_t i = 0; i < body; i += 16) {
    const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    const __m512i t = _mm512_add_epi32(_mm512_add_epi32(c, _mm512_and_si512(c, signBit)), bias);
    const __m512i v = _mm512_maskz_slli_epi32(_mm512_test_epi32_mask(c, flag), t, 23);
    if (stream)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), v);
    else
      _mm512_storeu_si512(out + i, v);
  }
  if (stream) _mm_sfence();
  decodeLoop(codes + body, n - body, out + body);
}

// decode512 with AVX2: the same arithmetic, the flag test as a compare mask.
__attribute__((target("avx2,fma,f16c"))) void decode256(const uint8_t* codes, int64_t n, float* out) {
  const int64_t body = n / 8 * 8;
  const __m256i signBit = _mm256_set1_epi32(0x80), flag = _mm256_set1_epi32(0x40);
  const __m256i bias = _mm256_set1_epi32(127 + kNatMinExp - 0x40);
  // Large outputs: non-temporal stores (simd::kStreamBytes).
  const bool stream = n * 4 >= simd::kStreamBytes && reinterpret_cast<uintptr_t>(out) % 32 == 0;
  for (int64_t i = 0; i < body; i += 8) {
    const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
    const __m256i t = _mm256_add_epi32(_mm256_add_epi32(c, _mm256_and_si256(c, signBit)), bias);
    const __m256i on = _mm256_cmpeq_epi32(_mm256_and_si256(c, flag), flag);
    const __m256i v = _mm256_and_si256(_mm256_slli_epi32(t, 23), on);
    if (stream)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(out + i), v);
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), v);
  }
  if (stream) _mm_sfence();
  decodeLoop(codes + body, n - body, out + body);
}

// decode512 with AVX-512 VBMI byte permutes, 64 codes per step: only the two
// high bytes of a decoded float are non-zero, b3 = sign·2^7 + (field >> 1) and
// b2 = (field & 1)·2^7 with field = (c & 0x3F) + 77; both come from 64-entry
// byte tables indexed by c's low six bits (vpermb ignores the others), masked
// to 0 without the flag, and one two-source permute per 16 floats places them
// at bytes 2 and 3 of each float, zeroing bytes 0 and 1.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void decodeVbmi(const uint8_t* codes, int64_t n, float* out) {
  const int64_t body = n / 64 * 64;
  alignas(64) uint8_t hi[64], mid[64], place[4][64];
  for (int i = 0; i < 64; ++i) {
    const int field = i + 127 + kNatMinExp;
    hi[i] = static_cast<uint8_t>(field >> 1);
    mid[i] = static_cast<uint8_t>((field & 1) << 7);
  }
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 16; ++j) {
      place[k][4 * j] = place[k][4 * j + 1] = 0;               // zeroed by the mask
      place[k][4 * j + 2] = static_cast<uint8_t>(16 * k + j);  // from b2 (first source)
      place[k][4 * j + 3] = static_cast<uint8_t>(64 + 16 * k + j);  // from b3 (second source)
    }
  const __m512i hiT = _mm512_load_si512(hi), midT = _mm512_load_si512(mid);
  const __m512i signBit = _mm512_set1_epi8(static_cast<char>(0x80)), flagBit = _mm512_set1_epi8(0x40);
  const __m512i p0 = _mm512_load_si512(place[0]), p1 = _mm512_load_si512(place[1]), p2 = _mm512_load_si512(place[2]),
                p3 = _mm512_load_si512(place[3]);
  constexpr __mmask64 kHighBytes = 0xCCCCCCCCCCCCCCCCULL;  // bytes 2 and 3 of every float
  const bool stream = n * 4 >= simd::kStreamBytes && reinterpret_cast<uintptr_t>(out) % 64 == 0;
  for (int64_t i = 0; i < body; i += 64) {
    const __m512i c = _mm512_loadu_si512(codes + i);
    const __mmask64 nz = _mm512_test_epi8_mask(c, flagBit);
    const __m512i b3 = _mm512_maskz_add_epi8(nz, _mm512_permutexvar_epi8(c, hiT), _mm512_and_si512(c, signBit));
    const __m512i b2 = _mm512_maskz_permutexvar_epi8(nz, c, midT);
    const __m512i v[4] = {_mm512_maskz_permutex2var_epi8(kHighBytes, b2, p0, b3),
                          _mm512_maskz_permutex2var_epi8(kHighBytes, b2, p1, b3),
                          _mm512_maskz_permutex2var_epi8(kHighBytes, b2, p2, b3),
                          _mm512_maskz_permutex2var_epi8(kHighBytes, b2, p3, b3)};
    for (int k = 0; k < 4; ++k) {
      if (stream)
        _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i + 16 * k), v[k]);
      else
        _mm512_storeu_si512(out + i + 16 * k, v[k]);
    }
  }
  if (stream) _mm_sfence();
  decode512(codes + body, n - body, out + body);
}

bool haveVbmi() {
  static const bool v = __builtin_cpu_supports("avx512vbmi");
  return v;
}
#endif

}  // namespace

int64_t encode(const float* x, int64_t n, uint64_t seed, bool stochastic, uint8_t* out, uint32_t* expMax) {
#if defined(__x86_64__) && defined(__GNUC__)
  // The vector encoders draw their noise with VAES (AVX-512) or AES-NI (AVX2).
  if (simd::haveAvx512() && aesnoise::haveVaes512())
    return detail::encode512(x, n, seed, stochastic, haveVbmi(), out, expMax);
  if (simd::haveAvx2() && aesnoise::haveAesNi()) return detail::encode256(x, n, seed, stochastic, out, expMax);
#endif
  return detail::encodeLoop(x, n, seed, 0, stochastic, out, expMax);
}

void decode(const uint8_t* codes, int64_t n, float* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (simd::haveAvx512()) return haveVbmi() ? decodeVbmi(codes, n, out) : decode512(codes, n, out);
  if (simd::haveAvx2()) return decode256(codes, n, out);
#endif
  decodeLoop(codes, n, out);
}

}  // namespace gradzip::compress::nat
