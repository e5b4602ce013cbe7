// Single-pass kernels over raw float buffers for the compressors' hot loops:
// the finiteness check fused into the cast to the wire type (so "NaN never
// spreads silently" costs no extra pass over the gradient), fp32 <-> fp16 and
// fp32 <-> bf16 casts with an optional scale, a fused finite-checking copy, and
// a reusable-buffer helper, and the SIMD tier (Level) that every compressor
// kernel dispatches on. Each kernel is one loop over contiguous memory, with
// AVX-512 and AVX2 intrinsic paths picked at run time by level() and a
// portable loop (compiled for AVX-512, AVX2 and baseline x86-64 by GCC function
// multi-versioning; plain scalar code elsewhere). The casts round to nearest
// even, exactly as at::Tensor::to(kHalf / kBFloat16).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

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

// The instruction-set tier of the compressors' hand-written kernels: AVX-512
// (F, DQ, BW, VL), AVX2 (with FMA and F16C, as x86-64-v3) or the portable loops
// (which GCC still vectorises per target_clones target). level() is the CPU's
// tier, lowered to a cap when one is set: the tests run every tier the CPU
// has against the same references, and `gradzip bench compressors --simd`
// measures a lower tier on a wider CPU. All tiers produce the same bits except
// where a kernel's header says otherwise.
enum class Level : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
Level cpuLevel();
Level level();
// Caps level() at `cap` for the whole process (set it before kernels run, not
// while they run on other threads); returns the previous cap.
Level capLevel(Level cap);
// "portable" | "avx2" | "avx512", and back (throws on any other name).
const char* levelName(Level l);
Level parseLevel(const std::string& name);

// level() == Level::kAvx512 (the wide paths of the compressors' own intrinsic
// kernels).
bool haveAvx512();
// level() >= Level::kAvx2.
bool haveAvx2();

// Squared L2 norm of every C-chunk of x[0, d) (the last chunk may be short)
// into sq[0, ceil(d/C)); returns allFinite(x), decided in the same pass.
bool chunkSquaredNorms(const float* x, int64_t d, int64_t C, float* sq);

// out[k] = uniform01Half(seed, first + k) for k < n (compress/kernels/CounterRng.h),
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
