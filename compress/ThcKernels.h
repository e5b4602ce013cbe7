// Fused kernels of THC's all-reduce deployment (end-to-end-utility paper
// §3.2.2 on THC Alg. 3): the block norms in one pass over x; then, one
// rotation block at a time in a cache-resident buffer, the forward rotation,
// quantisation to signed zero-centred codes and packing straight into the
// saturating words; and unpacking fused with the dequantisation and the
// inverse rotation. They compute exactly what the
// step-by-step path of Thc.cpp computes (same float operations in the same
// order, same noise stream, same word layout as SaturatingPackedSum), in a few
// passes over reused buffers instead of one d-sized temporary per step.
#pragma once

#include "compress/Hadamard.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace gradzip::compress::thc {

// norms[b] = the L2 norm of block b of pad(x) (= of the rotated block, the
// RHT being orthonormal per block; double accumulation). Returns whether x is
// finite (checked in the same pass).
bool blockNorms(const float* x, const RandomizedHadamard& rht, float* norms);

// Rotates block by block (R_b = H·D·pad(x)_b in a block-sized buffer that stays
// in cache; D from sharedSeed) and quantises to the codes of the all-reduce
// form: with M = range[b] and L = 2^(bits−1) − 1, y = clamp(R·(1/sqrt(B))·(L/M),
// −L, L) (0 when M = 0), c = floor(y) + [uniform01(seed, i) < y − floor(y)],
// stored as c + L' in `fieldBits`-bit fields of SaturatingPackedSum's words.
at::Tensor rotateQuantizePack(const float* x, const float* range, const RandomizedHadamard& rht, int bits,
                              int fieldBits, uint64_t sharedSeed, uint64_t seed, std::vector<float>& scratch,
                              at::Tensor& cache);

// The inverse, block by block: s = field − L', y = (s/n)·(M/L), then
// D·H·y/sqrt(B) for the first dim() coordinates, into a float tensor of dim()
// elements (`cache` reused when free).
at::Tensor unpackInverse(const at::Tensor& words, const float* range, const RandomizedHadamard& rht, int bits,
                         int fieldBits, int n, uint64_t sharedSeed, std::vector<float>& scratch, at::Tensor& cache);

}  // namespace gradzip::compress::thc
