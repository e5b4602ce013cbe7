// Internals shared by C_nat's kernel files (compress/kernels/NaturalKernels.cpp: the
// portable loops, the decoders and the dispatch; compress/kernels/NaturalEncoder512.cpp
// and NaturalEncoder256.cpp: the AVX-512 and AVX2 encoders). Not part of the
// compressor interface.
#pragma once

#include <cstdint>

namespace gradzip::compress::nat::detail {

// naturalEncode for x[0, n) in one branch-free loop (so it vectorises), with the
// randomness of element i from naturalNoise(seed, first + i). Returns the
// number of exponents clipped at 2^10 and raises *expMax to x's largest
// exponent field (finiteness test, SimdKernels.cpp).
int64_t encodeLoop(const float* x, int64_t n, uint64_t seed, uint64_t first, bool stochastic, uint8_t* out,
                   uint32_t* expMax);

// encode() on CPUs with AVX-512 F/DQ/BW/VL (x86-64, GCC or Clang; callers check
// the CPU): 64 coordinates per step, with VBMI's fast path when `vbmi`, the
// tail through encodeLoop. The same codes and return values as encodeLoop.
// encode() on CPUs with AVX2, FMA and F16C (x86-64; callers check the CPU): 32
// coordinates per step, the tail through encodeLoop. The same codes and return
// values as encodeLoop.
int64_t encode256(const float* x, int64_t n, uint64_t seed, bool stochastic, uint8_t* out, uint32_t* expMax);

int64_t encode512(const float* x, int64_t n, uint64_t seed, bool stochastic, bool vbmi, uint8_t* out,
                  uint32_t* expMax);

}  // namespace gradzip::compress::nat::detail
