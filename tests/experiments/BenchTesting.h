// Test helpers for `gradzip bench compressors` (experiments/Benchmarks.h):
// one small run whose printed table is swallowed, and reading what it wrote.
#pragma once

#include "experiments/Benchmarks.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace gradzip::experiments::testing {

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// fp16 at d = 2^10, one repeat, on `device`, appending to `out` ("" = no file).
inline BenchCompressorsArgs tinyBench(const std::string& out, const std::string& device) {
  BenchCompressorsArgs a;
  a.compressors = {"fp16"};
  a.minLog2 = a.maxLog2 = 10;
  a.repeats = 1;
  a.out = out;
  a.device = device;
  return a;
}

// benchCompressors(args) with its table kept off the test's output.
inline int runQuietly(const BenchCompressorsArgs& args) {
  ::testing::internal::CaptureStdout();
  int rc = -1;
  try {
    rc = benchCompressors(args);
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  std::fflush(stdout);
  ::testing::internal::GetCapturedStdout();
  return rc;
}

}  // namespace gradzip::experiments::testing
