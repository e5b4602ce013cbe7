// The randomized Hadamard transform of compress/kernels/Hadamard.h written in
// ATen operations, for the device-generic codec paths (compress/CodecPath.h):
// the same random ±1 diagonal D (bit i mod 64 of word i/64 of the shared
// seed's counter stream, compress/kernels/CounterRngGeneric.h) and the fast
// Walsh–Hadamard transform as log2(B) butterfly levels on a reshaped view, in
// the kernels' order (stride 1 first, u + v and u − v per pair), so the
// rotation of a CPU run and of a CUDA run are the bits RandomizedHadamard
// computes. Every result lives on the input's device.
#pragma once

#include "compress/kernels/Hadamard.h"

#include <ATen/ATen.h>

#include <cstdint>

namespace gradzip::compress::generic {

// D's signs for coordinates [0, n) as float32 ±1.0 on `device`: −1 where bit
// (i mod 64) of randomBits(seed, i/64) is set (applyRandomSigns' rule; a
// product with −1 flips the sign bit exactly as its xor does, zeros included).
at::Tensor randomSigns(int64_t n, uint64_t seed, at::Device device);

// Unnormalised fast Walsh–Hadamard transform of every `block`-sized block of
// the 1-D float tensor x (numel a multiple of block, block a power of two):
// fwhtInPlace's result as a new tensor.
at::Tensor fwht(const at::Tensor& x, int64_t block);

// RandomizedHadamard::forward: x (1-D float32, rht.dim()) to the
// rht.paddedDim() rotated coordinates H·D·pad(x)·(1/sqrt(B)).
at::Tensor rhtForward(const RandomizedHadamard& rht, const at::Tensor& x, uint64_t sharedSeed);

// RandomizedHadamard::inverse: y (1-D float32, rht.paddedDim()) to the first
// rht.dim() coordinates of D·H·y·(1/sqrt(B)).
at::Tensor rhtInverse(const RandomizedHadamard& rht, const at::Tensor& y, uint64_t sharedSeed);

}  // namespace gradzip::compress::generic
