// Shared helpers of the GPU tests: the skip that says why no GPU is used.
#pragma once

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace gradzip::testing {

// Why this process cannot run CUDA work, or "" when it can.
inline std::string whyNoGpu() {
  if (!at::detail::getCUDAHooks().isBuilt()) return "this test program was linked without the CUDA libraries";
  if (!at::globalContext().hasCUDA()) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return std::string("no GPU is visible") + (visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : "");
  }
  return "";
}

}  // namespace gradzip::testing

// First statement of every GPU test.
#define GZ_NEED_GPU()                                                             \
  do {                                                                            \
    if (const std::string why = ::gradzip::testing::whyNoGpu(); !why.empty())     \
      GTEST_SKIP() << "needs a GPU: " << why;                                     \
  } while (0)
