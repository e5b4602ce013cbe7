// Fused kernels of THC's parameter-server deployment (THC paper Alg. 2–3, the
// table-based and uniform variants): the rotated vector goes to packed b-bit
// table indices in one pass (clamp to [m, M], the map to the g-grid, table
// SQ, packing), and packed indices or packed w-bit sums come back to
// rotated-domain floats in one pass each. They replace a chain of d-sized
// temporaries (grid values, uint8 codes, X_i, int32 sums) with tiles that stay
// in L1. The codes are exactly TableQuantizer::quantize's
// (compress/kernels/StochasticQuantize.h) on the grid values Thc computes; the
// AVX-512 tier does the table lookups with in-register permutes when the
// table has at most 16 entries and g <= 32 (every b <= 4 with the paper's
// g = 30); larger tables take the compiler's vectorised loop.
#pragma once

#include "compress/kernels/StochasticQuantize.h"

#include <cstdint>
#include <vector>

namespace gradzip::compress::thc {

// THC's table in the forms the kernels read, built once per table (Thc keeps
// one per granularity): cell[c] = z with T(z) <= c < T(z+1) for c in [0, g)
// and T itself, as floats and as ints; cell and the floats padded with zeros
// to whole registers.
struct TableLookup {
  explicit TableLookup(const TableQuantizer& q);
  int g;
  bool small;                 // <= 16 entries and g <= 32: the AVX-512 loop's permutes hold the table
  std::vector<int32_t> cell;  // >= 32 entries
  std::vector<float> values;  // T(z), >= 16 entries
  std::vector<int32_t> ints;  // T(z), the owner's lookup-and-add
};

// Alg. 2 lines 8–11 on the coordinates [0, dp) of U = H·D·pad(x) without the
// orthonormal scale (RandomizedHadamard::forwardUnscaled), in blocks of B with
// M = range[b] and m = −M: R = U·inv, y = min(max((min(max(R, m), M) − m)·g/(M − m), 0), g)
// (y = g/2 where M <= 0: the block decodes to 0), then z = TableQuantizer::quantize(y)
// with noise uniform01Half(seed, i), packed `bits` per code (compress/kernels/BitPack.h
// layout) into out[0, dp·bits/8). dp and B multiples of 8; bits <= 8.
void quantizeTablePack(const float* U, int64_t dp, int64_t B, const float* range, float inv,
                       const TableLookup& table, int bits, uint64_t seed, uint8_t* out);

// X_i of Alg. 2 (the worker's own quantised vector, for error feedback):
// out[i] = fma(T[z_i], (M − m)/g, m) for the packed codes of [0, dp).
void dequantizeCodes(const uint8_t* packed, int bits, int64_t dp, int64_t B, const float* range,
                     const TableLookup& table, float* out);

// Alg. 2 line 13 at a shard owner: sum[k] += T[z_k] for the `count` packed
// b-bit indices one worker sent (count a multiple of 8).
void addTableValues(const uint8_t* packed, int bits, int64_t count, const TableLookup& table, int32_t* sum);

// Alg. 2 lines 16–17 for coordinates [first, first + count) (first a multiple
// of 8): out[k] = fma(s/n, (M − m)/g, m) with s the k-th w-bit sum of `packed`.
void dequantizeSums(const uint8_t* packed, int w, int64_t first, int64_t count, int64_t B, const float* range,
                    int n, int g, float* out);

}  // namespace gradzip::compress::thc
