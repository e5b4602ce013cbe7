// The counter-based RNG of compress/kernels/CounterRng.h written in ATen
// integer operations, for the device-generic codec paths
// (compress/CodecPath.h): word i of stream `seed` is randomBits(seed, i) bit
// for bit on any device, so a CUDA run draws what the CPU kernels draw. uint64
// arithmetic is emulated on int64 tensors: additions and multiplications wrap
// modulo 2^64 as unsigned ones do, and a logical right shift is an arithmetic
// shift followed by a mask of the low 64 − k bits. Every function returns a
// new tensor on `device`; the 64-bit words are int64 holding the uint64 bit
// pattern (negative when the top bit is set).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace gradzip::compress::generic {

// mix64 (CounterRng.h) of every element of an int64 tensor of states.
at::Tensor mix64(const at::Tensor& states);

// randomBits(seed, i) for every counter i of an int64 tensor (any shape);
// on counters' device.
at::Tensor randomBitsAt(uint64_t seed, const at::Tensor& counters);

// randomBits(seed, i) for i = offset, ..., offset + count − 1 (int64, 1-D).
at::Tensor randomBits(uint64_t seed, int64_t offset, int64_t count, at::Device device);

// uniform01(seed, i) for i = offset, ..., offset + count − 1 (float32, 1-D):
// the top 24 bits of each word times 2^-24, exactly as the scalar does.
at::Tensor uniform01(uint64_t seed, int64_t offset, int64_t count, at::Device device);

// randomHalf(seed, i) for i = offset, ..., offset + count − 1, as int64 in
// [0, 2^32) (1-D): the low half of word i/2 for even i, the high half for odd i.
at::Tensor randomHalf(uint64_t seed, int64_t offset, int64_t count, at::Device device);

// uniform01Half(seed, i) for i = offset, ..., offset + count − 1 (float32, 1-D).
at::Tensor uniform01Half(uint64_t seed, int64_t offset, int64_t count, at::Device device);

// The logical right shift x >> k (0 < k < 64) of the uint64 patterns in an
// int64 tensor.
at::Tensor shiftRightLogical(const at::Tensor& x, int k);

}  // namespace gradzip::compress::generic
