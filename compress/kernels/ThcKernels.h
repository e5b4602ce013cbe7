// Fused kernels of THC's all-reduce deployment (end-to-end-utility paper
// §3.2.2 on THC Alg. 3): the block norms in one pass over x; then, one
// rotation block at a time in a cache-resident buffer, the forward rotation,
// quantisation to signed zero-centred codes and packing straight into the
// saturating words; and unpacking fused with the dequantisation and the
// inverse rotation (blocks of 256..4096 coordinates with 4- or 8-bit fields
// take the AVX-512 kernels of compress/kernels/ThcBlock512.h). They compute exactly what the
// step-by-step path of Thc.cpp computes (same float operations in the same
// order, same noise stream, same word layout as SaturatingPackedSum), in a few
// passes over reused buffers instead of one d-sized temporary per step.
#pragma once

#include "compress/kernels/Hadamard.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace gradzip::compress::thc {

// norms[b] = the L2 norm of block b of pad(x) (= of the rotated block, the
// RHT being orthonormal per block; double accumulation). Returns whether x is
// finite (checked in the same pass).
bool blockNorms(const float* x, const RandomizedHadamard& rht, float* norms);

// Block norms computed inside rotateQuantizePack's rotation pass (the codec's
// encode, where no norm round comes between the two), instead of a separate
// blockNorms pass.
struct NormsInPass {
  float* norms = nullptr;   // [numBlocks]: as blockNorms
  double rangeScale = 0;    // M = float(double(norm) · rangeScale), as Thc::rangeOf (t_p/√B)
  bool finite = true;       // false when x has a NaN or ±Inf (the codes are then unspecified)
};

// Rotates block by block (R_b = H·D·pad(x)_b in a block-sized buffer that stays
// in cache; D from sharedSeed) and quantises to the codes of the all-reduce
// form: with M = range[b] and L = 2^(bits−1) − 1, y = clamp(R·(1/sqrt(B))·(L/M),
// −L, L) (0 when M = 0), c = roundUniform(y, k_i) with k_i = randomHalf(seed, i) >> 8
// (StochasticQuantize.h: up iff k_i < ceil(2^24·(y − floor(y)))),
// stored as c + L' in `fieldBits`-bit fields of SaturatingPackedSum's words.
// With `fused`, range is ignored: the norms and ranges come from the rotation pass.
at::Tensor rotateQuantizePack(const float* x, const float* range, const RandomizedHadamard& rht, int bits,
                              int fieldBits, uint64_t sharedSeed, uint64_t seed, std::vector<float>& scratch,
                              at::Tensor& cache, NormsInPass* fused = nullptr);

// The inverse, block by block: s = field − L', y = (s/n)·(M/L), then
// D·H·y/sqrt(B) for the first dim() coordinates, into a float tensor of dim()
// elements (`cache` reused when free).
at::Tensor unpackInverse(const at::Tensor& words, const float* range, const RandomizedHadamard& rht, int bits,
                         int fieldBits, int n, uint64_t sharedSeed, std::vector<float>& scratch, at::Tensor& cache);

}  // namespace gradzip::compress::thc
