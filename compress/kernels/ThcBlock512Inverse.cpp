// Implements compress/kernels/ThcBlock512.h, inverse direction (the forward one is in
// ThcBlock512.cpp, whose comment describes the two-pass layout): the first
// pass unpacks and dequantises a 256-group into 16 registers and runs
// butterfly levels 1..128 on them; the second runs levels 256..B/2 on register
// columns, then the 1/√B scale and the signs of D. 4-bit fields are looked up
// in a 16-float register of field values.
#include "compress/kernels/ThcBlock512.h"

#include "compress/kernels/FwhtRegisters.h"
#include "compress/kernels/ThcBlock512Detail.h"

#include <cstring>

namespace gradzip::compress::thc::block512 {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

// Lane v: the value of field v (Thc::dequantizeSum: ((v − Lf)/n)·ml, the same
// float operations lane by lane; 4-bit fields: v < 16), by one vector division
// rather than 16 scalar ones per block.
GZ_THC512 inline __m512 fieldValues(int32_t Lf, float n, float ml) {
  const __m512i v = _mm512_sub_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                     _mm512_set1_epi32(Lf));
  return _mm512_mul_ps(_mm512_div_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(n)), _mm512_set1_ps(ml));
}

template <int kFieldBits, bool kDivide>
GZ_THC512 void dequantizeGroupsT(const uint8_t* in, int64_t B, int32_t Lf, float n, float ml, float* Y) {
  const __m512i off = _mm512_set1_epi32(Lf);
  const __m512 nV = _mm512_set1_ps(n), mlV = _mm512_set1_ps(ml);
  const __m512 values = fieldValues(Lf, n, ml);
  // Multishift control of the 4-bit lookup: in 64-bit lane w, byte 0 takes
  // bits 8w.. and byte 4 takes bits 8w + 4.. of the lane.
  const __m512i nibbleShifts = _mm512_set_epi64(0x0000003C00000038LL, 0x0000003400000030LL, 0x0000002C00000028LL,
                                                0x0000002400000020LL, 0x0000001C00000018LL, 0x0000001400000010LL,
                                                0x0000000C00000008LL, 0x0000000400000000LL);
  for (int64_t g = 0; g < B; g += 256) {
    __m512 v[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      const int64_t k = g + 16 * r;
      __m512 y;
      if constexpr (kFieldBits == 4) {
        // The 8 bytes broadcast to every 64-bit lane; in lane w a multishift
        // puts bits 8w.. (the low nibble of byte w) in the low byte of the
        // lane's low half and bits 8w + 4.. (its high nibble) in that of its
        // high half, and the table lookup reads only the low 4 bits of each
        // 32-bit index.
        int64_t bytes;
        std::memcpy(&bytes, in + k / 2, 8);
        y = _mm512_permutexvar_ps(_mm512_multishift_epi64_epi8(nibbleShifts, _mm512_set1_epi64(bytes)), values);
      } else {
        const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k)));
        __m512 s = _mm512_cvtepi32_ps(_mm512_sub_epi32(c, off));
        if constexpr (kDivide) s = _mm512_div_ps(s, nV);  // (x / 1 is x exactly: skipped for one rank)
        y = _mm512_mul_ps(s, mlV);                        // Thc::dequantizeSum: (s/n)·(M/L)
      }
      v[r] = fwht::strides1to8(y);
    }
    fwht::registerLevels<16>(v);
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) _mm512_storeu_ps(Y + g + 16 * r, v[r]);
  }
}

// kFull: every coordinate of the block exists (no store masks, no per-store test).
template <int G, bool kFull>
GZ_THC512 void inverseColumnsG(const float* Y, int64_t valid, const uint64_t* signs, float inv, float* out) {
  const __m512 invV = _mm512_set1_ps(inv);
  for (int64_t j = 0; j < 256; j += 16) {
    __m512 v[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) v[g] = _mm512_loadu_ps(Y + 256 * g + j);
    fwht::registerLevels<G>(v);
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      const int64_t k = 256 * g + j;
      // RandomizedHadamard::inverse: the 1/√B scale, then D.
      const __m512 w = detail::flip(_mm512_mul_ps(v[g], invV), detail::signMask(signs, k));
      if (kFull || k + 16 <= valid)
        _mm512_storeu_ps(out + k, w);
      else
        _mm512_mask_storeu_ps(out + k, detail::firstLanes(valid - k), w);
    }
  }
}

}  // namespace

void dequantizeGroups(const uint8_t* in, int64_t B, int fieldBits, int32_t Lf, float n, float ml, float* Y) {
  if (n == 1.0f) {
    if (fieldBits == 4) return dequantizeGroupsT<4, false>(in, B, Lf, n, ml, Y);
    return dequantizeGroupsT<8, false>(in, B, Lf, n, ml, Y);
  }
  if (fieldBits == 4) return dequantizeGroupsT<4, true>(in, B, Lf, n, ml, Y);
  dequantizeGroupsT<8, true>(in, B, Lf, n, ml, Y);
}

template <bool kFull>
void inverseColumnsF(const float* Y, int64_t valid, const uint64_t* signs, int64_t B, float inv, float* out) {
  switch (B / 256) {
    case 1: return inverseColumnsG<1, kFull>(Y, valid, signs, inv, out);
    case 2: return inverseColumnsG<2, kFull>(Y, valid, signs, inv, out);
    case 4: return inverseColumnsG<4, kFull>(Y, valid, signs, inv, out);
    case 8: return inverseColumnsG<8, kFull>(Y, valid, signs, inv, out);
    default: return inverseColumnsG<16, kFull>(Y, valid, signs, inv, out);
  }
}

void inverseColumns(const float* Y, int64_t valid, const uint64_t* signs, int64_t B, float inv, float* out) {
  if (valid >= B) return inverseColumnsF<true>(Y, valid, signs, B, inv, out);
  inverseColumnsF<false>(Y, valid, signs, B, inv, out);
}

#else  // no AVX-512 build: callers take the portable loops

void dequantizeGroups(const uint8_t*, int64_t, int, int32_t, float, float, float*) {}
void inverseColumns(const float*, int64_t, const uint64_t*, int64_t, float, float*) {}

#endif

}  // namespace gradzip::compress::thc::block512
