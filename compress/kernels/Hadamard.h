// The randomized Hadamard transform (RHT) of THC §5.1: R = H·D·x with D a random
// ±1 diagonal drawn from a seed shared by all workers and H the orthonormal
// Walsh–Hadamard matrix, computed in place by the iterative fast transform in
// O(d log d). Inputs are zero-padded to the transform length. The inverse is
// D·H·y (H is symmetric and orthonormal). With a block size B < the padded
// length it is the *partial rotation* of the end-to-end-utility paper §3.2.2:
// the transform stops after log2(B) butterfly rounds, which equals rotating
// every B-sized block separately (each block orthonormal on its own).
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

namespace gradzip::compress {

// Unnormalised in-place fast Walsh–Hadamard transform of every `block`-sized
// block of x[0, n) (n a multiple of block, block a power of two). Applying it
// twice multiplies by `block`.
void fwhtInPlace(float* x, int64_t n, int64_t block);

// D, the RHT's random ±1 diagonal: out[i − lo] = ±(in[i − lo]·scale) for
// coordinates i in [lo, hi) of a vector (no product when scale == 1), negated
// iff bit (i mod 64) of word i/64 of `seed`'s stream (CounterRng.h randomBits)
// is set. An xor of the sign bit, branch-free (a branch on random bits
// mispredicts half the time); with AVX2, eight coordinates per step take their
// sign bits from one byte of the word by a variable shift. in may equal out.
void applyRandomSigns(const float* in, int64_t lo, int64_t hi, uint64_t seed, float* out, float scale = 1.0f);

class RandomizedHadamard {
 public:
  // d > 0 coordinates; blockLog2 = 0 means one full rotation over the padded
  // vector, otherwise blocks of 2^blockLog2 (capped at the full length).
  // Padded length: next power of two >= max(d, 8) for a full rotation, else d
  // rounded up to a multiple of the block (never below 8).
  RandomizedHadamard(int64_t d, int blockLog2 = 0);

  int64_t dim() const { return d_; }
  int64_t paddedDim() const { return padded_; }
  int64_t blockSize() const { return block_; }
  int64_t numBlocks() const { return padded_ / block_; }
  // The orthonormal scale 1/sqrt(B) in float, as forward() and inverse() apply it.
  float scale() const { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(block_))); }

  // x: 1-D float32 of dim() elements; returns paddedDim() rotated coordinates.
  at::Tensor forward(const at::Tensor& x, uint64_t sharedSeed) const;
  // y: 1-D float32 of paddedDim() elements; returns the first dim() coordinates
  // of D·H·y (the padding positions are dropped).
  at::Tensor inverse(const at::Tensor& y, uint64_t sharedSeed) const;

  // The same two transforms on caller-owned buffers, for kernels that fold the
  // orthonormal scale into their own pass (compress/kernels/ThcTableKernels.h).
  // out[0, paddedDim()) = H·D·pad(x) without the 1/sqrt(B): forward() is this
  // times float(1/sqrt(B)). x holds dim() floats.
  void forwardUnscaled(const float* x, uint64_t sharedSeed, float* out) const;
  // out[0, dim()) = inverse() of y[0, paddedDim()), bit for bit; y is overwritten.
  void inverseInPlace(float* y, uint64_t sharedSeed, float* out) const;

 private:
  int64_t d_, padded_, block_;
};

}  // namespace gradzip::compress
