// The hot loops of natural compression C_nat (natural-compression paper,
// Definition 1; compress/NaturalCompression.h): the 8-bit encoder over a whole
// float buffer and the decoder back to floats. Each has a portable loop
// (compiled for AVX-512, AVX2 and baseline x86-64 by GCC function
// multi-versioning) and hand-written AVX-512 and AVX2 paths
// picked at run time (simd::level()); all produce exactly naturalEncode /
// naturalDecode of every coordinate, with the noise of coordinate i from
// naturalNoise(seed, i), so the codes do not depend on the path (tested).
#pragma once

#include <cstdint>

namespace gradzip::compress::nat {

// out[i] = naturalEncode(x[i], naturalNoise(seed, i), stochastic) for i < n.
// Returns the number of exponents clipped at 2^10 and raises *expMax to the
// largest exponent field (bits & 0x7F800000) of x: x is finite iff it stays
// below 0x7F800000. Codes of non-finite inputs are unspecified.
int64_t encode(const float* x, int64_t n, uint64_t seed, bool stochastic, uint8_t* out, uint32_t* expMax);

// out[i] = naturalDecode(codes[i]) for i < n.
void decode(const uint8_t* codes, int64_t n, float* out);

}  // namespace gradzip::compress::nat
