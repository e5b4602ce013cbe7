// Tests experiments/CompressorBench.cpp's device handling (`gradzip bench
// compressors --device`): the CPU run keeps its results format (memcpy
// yardstick, no device key, the single-core report); --device cuda fails
// naming what is missing where no GPU can be used (tests/gpu/GpuBenchTest.cpp
// runs it on one: this program does not load the CUDA libraries).
#include "experiments/BenchDevice.h"
#include "experiments/Benchmarks.h"
#include "tests/experiments/BenchTesting.h"
#include "tests/testing/ThreadGroup.h"
#include "util/CudaAvailability.h"
#include "util/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gradzip::experiments {
namespace {

using ::testing::HasSubstr;
using testing::readFile;
using testing::runQuietly;

using testing::tinyBench;

TEST(CompressorBench, CpuRunKeepsItsFormat) {
  gradzip::testing::TempDir tmp;
  const std::string out = tmp.path() + "/compressors.jsonl";
  ASSERT_EQ(runQuietly(tinyBench(out, "cpu")), 0);
  const auto j = nlohmann::json::parse(readFile(out));
  EXPECT_EQ(j["compressor"], "fp16");
  EXPECT_TRUE(j.contains("memcpy_gbps"));
  EXPECT_FALSE(j.contains("device"));
  EXPECT_GT(j["gbps"].get<double>(), 0);
  EXPECT_THAT(readFile(tmp.path() + "/compressors.md"), HasSubstr("# Compressor throughput (single core)"));
}

TEST(CompressorBench, UnknownDeviceListsTheKnownOnes) {
  try {
    runQuietly(tinyBench("", "tpu"));
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("unknown device 'tpu' (known: cpu, cuda)"));
  }
}

TEST(CompressorBench, CudaWithoutAGpuNamesWhatIsMissing) {
  const std::string why = whyNoCuda();
  if (why.empty()) GTEST_SKIP() << "a GPU is usable here; tests/gpu/GpuBenchTest.cpp covers it";
  try {
    runQuietly(tinyBench("", "cuda"));
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("--device cuda needs a GPU, but " + why));
  }
  EXPECT_THROW(benchDevice("cuda", "test"), UserError);
}

}  // namespace
}  // namespace gradzip::experiments
