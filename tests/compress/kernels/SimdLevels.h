// Test helper: runs a test body once per SIMD tier the CPU has
// (compress/kernels/SimdKernels.h: the portable loops, AVX2, AVX-512), with the tier
// named in every failure message, so each hand-written kernel is checked
// against the same reference as the loops it replaces, on any machine that
// can run it. The cap is restored afterwards, also when the body fails.
#pragma once

#include "compress/kernels/SimdKernels.h"

#include <gtest/gtest.h>

namespace gradzip::testing {

template <class Body>
void forEachSimdLevel(Body&& body) {
  struct Restore {
    compress::simd::Level previous;
    ~Restore() { compress::simd::capLevel(previous); }
  };
  for (int l = 0; l <= static_cast<int>(compress::simd::cpuLevel()); ++l) {
    const auto level = static_cast<compress::simd::Level>(l);
    SCOPED_TRACE(std::string("SIMD level ") + compress::simd::levelName(level));
    Restore restore{compress::simd::capLevel(level)};
    ASSERT_EQ(compress::simd::level(), level);
    body();
  }
}

}  // namespace gradzip::testing
