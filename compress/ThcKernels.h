// Fused kernels of THC's all-reduce deployment (end-to-end-utility paper
// §3.2.2 on THC Alg. 3): the forward partial rotation with the block norms in
// the same pass over x, quantisation to signed zero-centred codes packed
// straight into the saturating words, and unpacking fused with the
// dequantisation and the inverse rotation. They compute exactly what the
// step-by-step path of Thc.cpp computes (same float operations in the same
// order, same noise stream, same word layout as SaturatingPackedSum), in a few
// passes over reused buffers instead of one d-sized temporary per step.
#pragma once

#include "compress/Hadamard.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace gradzip::compress::thc {

// R[0, paddedDim) = H·D·pad(x), the unnormalised transform (multiply by
// 1/sqrt(B) for the orthonormal one, THC §5.1); norms[b] = the L2 norm of block
// b of pad(x) (= of the rotated block; double accumulation). Returns whether x
// is finite (checked in the same pass).
bool rotateForward(const float* x, const RandomizedHadamard& rht, uint64_t sharedSeed, float* R, float* norms);

// Codes of the all-reduce form: with M = range[b] of the coordinate's block and
// L = 2^(bits−1) − 1, y = clamp(R·(1/sqrt(B))·(L/M), −L, L) (0 when M = 0),
// c = floor(y) + [uniform01(seed, i) < y − floor(y)], stored as c + L in
// `fieldBits`-bit fields of SaturatingPackedSum's words. Returns the words.
at::Tensor quantizePack(const float* R, const float* range, const RandomizedHadamard& rht, int bits, int fieldBits,
                        uint64_t seed, at::Tensor& cache);

// The inverse: s = field − L per coordinate, y = (s/n)·(M/L), then
// D·H·y/sqrt(B) for the first dim() coordinates, into a float tensor of dim()
// elements (`cache` reused when free). `scratch` holds paddedDim() floats.
at::Tensor unpackInverse(const at::Tensor& words, const float* range, const RandomizedHadamard& rht, int bits,
                         int fieldBits, int n, uint64_t sharedSeed, std::vector<float>& scratch, at::Tensor& cache);

}  // namespace gradzip::compress::thc
