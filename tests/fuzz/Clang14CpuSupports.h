// Fuzz builds only: force-included into compress/SimdKernels.cpp (see
// tests/fuzz/CMakeLists.txt). clang 14 rejects __builtin_cpu_supports("f16c")
// ("invalid cpu feature string"), which gcc accepts, so that file does not
// compile for the fuzz build; the config target links it through the compressor
// factory. Here every feature query answers "unsupported", so the kernels take
// their portable scalar paths — enough for fuzzing the config loader, which only
// constructs compressors. Remove once SimdKernels.cpp compiles with clang 14.
#pragma once

#define __builtin_cpu_supports(feature) gradzipFuzzCpuSupports(feature)
static inline bool gradzipFuzzCpuSupports(const char*) { return false; }
