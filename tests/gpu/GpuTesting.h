// Shared helpers of the GPU tests: the skip that says why no GPU is used.
#pragma once

#include "util/CudaAvailability.h"

#include <gtest/gtest.h>

#include <string>

// First statement of every GPU test.
#define GZ_NEED_GPU()                                                  \
  do {                                                                 \
    if (const std::string why = ::gradzip::whyNoCuda(); !why.empty()) \
      GTEST_SKIP() << "needs a GPU: " << why;                          \
  } while (0)
