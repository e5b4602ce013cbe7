// Implements compress/kernels/ThcTableKernels.h. Every pass works a tile of kTile
// coordinates at a time (split further where a rotation block ends), so the
// noise, the codes and the unpacked fields of a tile stay in L1 between the
// loops that produce and consume them. The portable loops define the result;
// the AVX-512 loop does the same float operations lane by lane.
#include "compress/kernels/ThcTableKernels.h"

#include "compress/kernels/BitPack.h"
#include "compress/kernels/CounterRng.h"
#include "compress/kernels/SimdKernels.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GZ_THC_TABLE_X86 1
#define GZ_THC_TABLE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GZ_THC_TABLE_X86 0
#define GZ_THC_TABLE_CLONES
#endif

namespace gradzip::compress::thc {
namespace {

constexpr int64_t kTile = 2048;

// Codes of R = U·inv on one run of a block (range M), noise u: the reference
// (TableQuantizer::quantize of Thc's grid values, Alg. 2 lines 8–10).
GZ_THC_TABLE_CLONES void runCodes(const float* __restrict U, int64_t len, float inv, float M, const TableLookup& t,
                                  const float* __restrict u, uint8_t* __restrict codes) {
  const float g = static_cast<float>(t.g);
  const float scale = g / (2 * M);
  const int32_t* cell = t.cell.data();
  const float* T = t.values.data();
  for (int64_t k = 0; k < len; ++k) {
    float y = 0.5f * g;  // M <= 0: an all-zero block, every value decodes to 0
    if (M > 0) {
      const float v = std::min(std::max(U[k] * inv, -M), M);
      y = std::min(std::max((v + M) * scale, 0.0f), g);
    }
    const int32_t z = cell[std::min(static_cast<int32_t>(y), t.g - 1)];  // y >= 0: truncation is floor
    const float lo = T[z], hi = T[z + 1];
    codes[k] = static_cast<uint8_t>(z + (u[k] * (hi - lo) < (y - lo) ? 1 : 0));
  }
}

#if GZ_THC_TABLE_X86
// runCodes sixteen lanes at a time for tables of at most 16 entries and
// g <= 32 (t.small): the table lookups are permutes of registers holding cell
// and T. (With larger tables the compiler's gathers in runCodes' AVX-512
// clone are at least as fast as hand-written ones:
// experiments/results/compressors_thc_ps.md, the note on 8 bits.)
__attribute__((target("avx512f"))) void runCodes512(const float* U, int64_t len, float inv, float M, const TableLookup& t,
                                                    const float* u, uint8_t* codes) {
  const float g = static_cast<float>(t.g);
  const __m512 invV = _mm512_set1_ps(inv), hiM = _mm512_set1_ps(M), loM = _mm512_set1_ps(-M),
               scaleV = _mm512_set1_ps(g / (2 * M)), gV = _mm512_set1_ps(g), zero = _mm512_setzero_ps(),
               half = _mm512_set1_ps(0.5f * g);
  const __m512i gm1 = _mm512_set1_epi32(t.g - 1), one = _mm512_set1_epi32(1);
  const __m512i cellLo = _mm512_loadu_si512(t.cell.data()), cellHi = _mm512_loadu_si512(t.cell.data() + 16);
  const __m512 T = _mm512_loadu_ps(t.values.data());
  const bool live = M > 0;
  int64_t k = 0;
  for (; k + 16 <= len; k += 16) {
    __m512 y = half;
    if (live) {
      const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(U + k), invV), loM), hiM);
      y = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_add_ps(v, hiM), scaleV), zero), gV);
    }
    const __m512i c = _mm512_min_epi32(_mm512_cvttps_epi32(y), gm1);
    const __m512i z = _mm512_permutex2var_epi32(cellLo, c, cellHi);
    const __m512 lo = _mm512_permutexvar_ps(z, T);
    const __m512 hi = _mm512_permutexvar_ps(_mm512_add_epi32(z, one), T);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_mul_ps(_mm512_loadu_ps(u + k), _mm512_sub_ps(hi, lo)),
                                            _mm512_sub_ps(y, lo), _CMP_LT_OQ);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + k), _mm512_cvtepi32_epi8(_mm512_mask_add_epi32(z, up, z, one)));
  }
  if (k < len) runCodes(U + k, len - k, inv, M, t, u + k, codes + k);
}
#endif

// X_i = fma(T[z], step, −M) on one run (step = (M − m)/g).
GZ_THC_TABLE_CLONES void runValues(const uint8_t* __restrict z, int64_t len, float M, const TableLookup& t,
                                   float* __restrict out) {
  const float step = 2 * M / static_cast<float>(t.g);
  const float* T = t.values.data();
  for (int64_t k = 0; k < len; ++k) out[k] = std::fma(T[z[k]], step, -M);
}

// fma(s/n, step, −M) on one run.
GZ_THC_TABLE_CLONES void runSums(const int32_t* __restrict s, int64_t len, float M, float n, int g,
                                 float* __restrict out) {
  const float step = 2 * M / static_cast<float>(g);
  for (int64_t k = 0; k < len; ++k) out[k] = std::fma(static_cast<float>(s[k]) / n, step, -M);
}

// sum[k] += T[z[k]] (the compiler's gathers where the CPU has them).
GZ_THC_TABLE_CLONES void addLookups(const uint8_t* __restrict z, int64_t len, const int32_t* __restrict T,
                                    int32_t* __restrict sum) {
  for (int64_t k = 0; k < len; ++k) sum[k] += T[z[k]];
}

// Calls f(offset in the tile, length, M) for the runs of the tile [first,
// first + len) that lie in one rotation block of B coordinates.
template <class F>
void forBlockRuns(int64_t first, int64_t len, int64_t B, const float* range, F&& f) {
  for (int64_t i = first, end = first + len; i < end;) {
    const int64_t blk = i / B, hi = std::min(end, (blk + 1) * B);
    f(i - first, hi - i, range[blk]);
    i = hi;
  }
}

// f(first, len) for every tile of [0, dp), in parallel chunks of tiles.
template <class F>
void forTiles(int64_t dp, F&& f) {
  at::parallel_for(0, (dp + kTile - 1) / kTile, 8, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) f(t * kTile, std::min(kTile, dp - t * kTile));
  });
}

}  // namespace

TableLookup::TableLookup(const TableQuantizer& q) : g(q.granularity()) {
  const auto& T = q.table();
  const auto& cells = q.cells();
  cell.assign(std::max<size_t>(cells.size(), 32), 0);
  std::copy(cells.begin(), cells.end(), cell.begin());
  values.assign(std::max<size_t>(T.size(), 16), 0.0f);
  for (size_t z = 0; z < T.size(); ++z) values[z] = static_cast<float>(T[z]);
  ints.assign(T.begin(), T.end());
  small = T.size() <= 16 && g <= 32;
}

void quantizeTablePack(const float* U, int64_t dp, int64_t B, const float* range, float inv,
                       const TableLookup& t, int bits, uint64_t seed, uint8_t* out) {
#if GZ_THC_TABLE_X86
  const bool wide = simd::haveAvx512();
#endif
  forTiles(dp, [&](int64_t first, int64_t len) {
    alignas(64) float u[kTile];
    alignas(64) uint8_t codes[kTile];
    simd::uniform01HalfFill(seed, static_cast<uint64_t>(first), len, u);
    forBlockRuns(first, len, B, range, [&](int64_t o, int64_t n, float M) {
#if GZ_THC_TABLE_X86
      if (wide && t.small) return runCodes512(U + first + o, n, inv, M, t, u + o, codes + o);
#endif
      runCodes(U + first + o, n, inv, M, t, u + o, codes + o);
    });
    packCodes(codes, len, bits, out + first * bits / 8);
  });
}

void dequantizeCodes(const uint8_t* packed, int bits, int64_t dp, int64_t B, const float* range,
                     const TableLookup& t, float* out) {
  forTiles(dp, [&](int64_t first, int64_t len) {
    alignas(64) uint8_t z[kTile];
    unpackCodes(packed + first * bits / 8, bits, len, z);
    forBlockRuns(first, len, B, range,
                 [&](int64_t o, int64_t n, float M) { runValues(z + o, n, M, t, out + first + o); });
  });
}

void addTableValues(const uint8_t* packed, int bits, int64_t count, const TableLookup& t, int32_t* sum) {
  forTiles(count, [&](int64_t first, int64_t len) {
    alignas(64) uint8_t z[kTile];
    unpackCodes(packed + first * bits / 8, bits, len, z);
    addLookups(z, len, t.ints.data(), sum + first);
  });
}

void dequantizeSums(const uint8_t* packed, int w, int64_t first, int64_t count, int64_t B, const float* range,
                    int n, int g, float* out) {
  forTiles(count, [&](int64_t at, int64_t len) {
    alignas(64) int32_t s[kTile];
    unpackCodes(packed + at * w / 8, w, len, s);
    forBlockRuns(first + at, len, B, range, [&](int64_t o, int64_t k, float M) {
      runSums(s + o, k, M, static_cast<float>(n), g, out + at + o);
    });
  });
}

}  // namespace gradzip::compress::thc
