// AVX-512 kernels for one rotation block of THC's all-reduce form (THC Alg. 3
// with the partial rotation of the end-to-end-utility paper §3.2.2), for
// blocks of B = 256·G coordinates, G in {1, 2, 4, 8, 16}, and 4- or 8-bit
// fields. Each direction is two passes over a block-sized buffer that stays in
// L1/L2: the forward pass loads x with the random signs D applied (and its sum
// of squares for the norm) and runs butterfly levels 1..128 of every 256-group
// in registers; the second pass runs levels 256..B/2 on columns of G registers
// and quantises and packs straight from them. The inverse is the mirror image
// (unpack and dequantise with levels 1..128, then levels 256..B/2, the 1/√B
// scale and D). They compute exactly what compress/kernels/ThcKernels.cpp's portable
// loops compute (same float operations in the same order, same noise
// uniform01Half, same word layout; tested through ThcKernelsTest's step-by-step
// comparison).
#pragma once

#include <cstdint>

namespace gradzip::compress::thc::block512 {

// True when the CPU has AVX-512 (F, DQ, BW, VL, VBMI) and a block of B coordinates
// with `fieldBits`-bit fields takes these kernels.
bool supports(int64_t B, int fieldBits);
// The same without the field condition: blockNorms sums squares with
// sumSquares exactly when this holds, so its norms equal rotateGroups'.
bool supportsBlock(int64_t B);

// Σ x² of x[0, valid) (a block of B coordinates, zero padded) in double, in
// rotateGroups' order.
double sumSquares(const float* x, int64_t valid, int64_t B);

// out[w] = randomBits(seed, first + w) for w < count (compress/kernels/CounterRng.h):
// the words of D for a block, eight splitmix64 words per step.
void signWords(uint64_t seed, uint64_t first, int64_t count, uint64_t* out);

// Forward, first half. x: the block's first coordinate, of which only
// [0, valid) exist (the rest is zero padding); signs: the block's B/64 words of
// D (local coordinate k is negated iff bit k mod 64 of signs[k/64] is set).
// Writes D·pad(x) after butterfly levels 1..128 into R[0, B); returns the sum of
// squares of x[0, valid) in double when `squares`, else 0.
double rotateGroups(const float* x, int64_t valid, const uint64_t* signs, int64_t B, bool squares, float* R);

// Forward, second half, and the quantiser: levels 256..B/2 of R, then for local
// coordinate k (global lo + k): y = clamp(R·inv·scale, −L, L) (0 when `zero`),
// c = floor(y) + [uniform01Half(seed, lo + k) < y − floor(y)], stored as c + Lf
// in the k-th `fieldBits`-bit field from `out` (low nibble first).
void quantizeColumns(const float* R, int64_t lo, int64_t B, float inv, float scale, bool zero, float L, int32_t Lf,
                     int fieldBits, uint64_t seed, uint8_t* out);

// Inverse, first half: y_k = ((field_k − Lf)/n)·ml for the block's B fields
// from `in`, through butterfly levels 1..128, into Y[0, B).
void dequantizeGroups(const uint8_t* in, int64_t B, int fieldBits, int32_t Lf, float n, float ml, float* Y);

// Inverse, second half: levels 256..B/2 of Y, then out[k] = ±(Y_k·inv) with the
// signs of D, for k < valid (the padding is dropped).
void inverseColumns(const float* Y, int64_t valid, const uint64_t* signs, int64_t B, float inv, float* out);

}  // namespace gradzip::compress::thc::block512
