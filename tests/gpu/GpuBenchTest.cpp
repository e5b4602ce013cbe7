// `gradzip bench compressors --device cuda` (experiments/CompressorBench.cpp)
// on a GPU: rows against a device-to-device copy, written to a results file of
// their own; the CPU's file is refused. Skipped, saying why, without a GPU.
#include "experiments/Benchmarks.h"
#include "tests/experiments/BenchTesting.h"
#include "tests/gpu/GpuTesting.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gmock/gmock.h>
#include <nlohmann/json.hpp>


namespace gradzip::experiments {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using testing::readFile;

int benchFp16(const std::string& out) { return testing::runQuietly(testing::tinyBench(out, "cuda")); }

TEST(GpuBench, CudaRunWritesGpuRows) {
  GZ_NEED_GPU();
  gradzip::testing::TempDir tmp;
  EXPECT_THROW(benchFp16(tmp.path() + "/compressors.jsonl"), UserError);  // the CPU's file
  const std::string out = tmp.path() + "/gpu_compressors.jsonl";
  ASSERT_EQ(benchFp16(out), 0);
  const auto j = nlohmann::json::parse(readFile(out));
  EXPECT_EQ(j["device"], "cuda:0");
  EXPECT_GT(j["copy_gbps"].get<double>(), 0);
  EXPECT_FALSE(j.contains("memcpy_gbps"));
  EXPECT_LT(j["vnmse"].get<double>(), 1e-4);  // fp16 keeps about 11 significant bits
  const std::string md = readFile(tmp.path() + "/gpu_compressors.md");
  EXPECT_THAT(md, HasSubstr("# Compressor throughput (GPU)"));
  EXPECT_THAT(md, Not(HasSubstr("failed")));
}

}  // namespace
}  // namespace gradzip::experiments
