// Single-pass kernels over raw float buffers for the compressors' hot loops:
// the finiteness check fused into the cast to the wire type (so "NaN never
// spreads silently" costs no extra pass over the gradient), fp32 <-> fp16 and
// fp32 <-> bf16 casts with an optional scale, a fused finite-checking copy, and
// a reusable-buffer helper. Each kernel is one loop over contiguous memory; it
// is compiled for AVX-512, AVX2 and baseline x86-64 and picked at run time
// (GCC function multi-versioning), with plain scalar code everywhere else. The
// casts round to nearest even, exactly as at::Tensor::to(kHalf / kBFloat16).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace gradzip::compress::simd {

// True iff every x[i] (i < n) is finite (neither NaN nor ±Inf).
bool allFinite(const float* x, int64_t n);

// out[i] = half(x[i] / div) (no division when div == 1); returns allFinite(x).
// The output is written even when the check fails (callers throw and drop it).
bool floatToHalf(const float* x, float div, c10::Half* out, int64_t n);
// out[i] = float(in[i]) * mul (no multiplication when mul == 1).
void halfToFloat(const c10::Half* in, float mul, float* out, int64_t n);
// As above for bfloat16.
bool floatToBf16(const float* x, float div, c10::BFloat16* out, int64_t n);
void bf16ToFloat(const c10::BFloat16* in, float mul, float* out, int64_t n);
// out[i] = x[i]; returns allFinite(x).
bool copyFinite(const float* x, float* out, int64_t n);

// Outputs of at least this many bytes are written with non-temporal stores
// where a kernel supports them: they exceed the last-level cache anyway, and
// streaming skips the read-for-ownership of every destination line (glibc's
// memcpy, the benchmark's yardstick, does the same for large copies).
constexpr int64_t kStreamBytes = int64_t{16} << 20;

// True when the CPU runs AVX-512 F, DQ, BW and VL (the wide paths of the
// compressors' own intrinsic kernels check it once).
bool haveAvx512();

// Squared L2 norm of every C-chunk of x[0, d) (the last chunk may be short)
// into sq[0, ceil(d/C)); returns allFinite(x), decided in the same pass.
bool chunkSquaredNorms(const float* x, int64_t d, int64_t C, float* sq);

// out[k] = uniform01Half(seed, first + k) for k < n (compress/CounterRng.h),
// the same numbers as the scalar stream, eight splitmix64 words (sixteen
// numbers) per AVX-512 step.
void uniform01HalfFill(uint64_t seed, uint64_t first, int64_t n, float* out);

// A 1-D tensor of `n` elements of `dtype` for a kernel's output: `cache` itself
// when nobody else holds it (no other tensor or view shares its storage), so a
// compressor that produces a d-sized result every step writes into warm pages
// instead of fresh ones; otherwise a new tensor, which becomes the cache. The
// returned tensor's contents are unspecified.
at::Tensor reusableBuffer(at::Tensor& cache, int64_t n, at::ScalarType dtype);

}  // namespace gradzip::compress::simd
