// Tests experiments/NoiseBench.cpp (`gradzip bench noise`): the bytes it
// writes are C_nat's noise blocks (compress/AesNoise.h) in x86 byte order, one
// stream of --seed, or with --blocks-per-seed N the first N blocks of each
// training step's stream (Context::privateSeed of steps 0, 1, .. on rank 0,
// bucket 0), cut at --bytes.
#include "comm/LocalCommunicator.h"
#include "compress/Compressor.h"
#include "compress/kernels/AesNoise.h"
#include "experiments/Benchmarks.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace gradzip::experiments {
namespace {

std::string run(const BenchNoiseArgs& args) {
  ::testing::internal::CaptureStdout();
  const int rc = benchNoise(args);
  std::fflush(stdout);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  return out;
}

std::string bytesOf(const std::vector<compress::aesnoise::Block>& blocks) {
  std::string s;
  for (const auto& b : blocks) {
    char buf[16];
    for (int j = 0; j < 8; ++j) {
      buf[j] = static_cast<char>(b.lo >> (8 * j));
      buf[8 + j] = static_cast<char>(b.hi >> (8 * j));
    }
    s.append(buf, 16);
  }
  return s;
}

TEST(NoiseBench, OneStreamIsTheSeedsBlocksInOrder) {
  BenchNoiseArgs args;
  args.seed = 42;
  args.bytes = 3 * 16 + 5;  // cut inside the fourth block
  const std::string want = bytesOf({compress::aesnoise::block(42, 0), compress::aesnoise::block(42, 1),
                                    compress::aesnoise::block(42, 2), compress::aesnoise::block(42, 3)});
  EXPECT_EQ(run(args), want.substr(0, 53));
}

TEST(NoiseBench, PerStepStreamsUseTheTrainingSeeds) {
  BenchNoiseArgs args;
  args.seed = 3;
  args.blocksPerSeed = 2;
  args.bytes = 6 * 16;
  comm::LocalCommunicator local;
  std::vector<compress::aesnoise::Block> want;
  for (int64_t step = 0; step < 3; ++step) {
    compress::Context ctx{local, nullptr, "engine", {}, 3, /*bucket=*/0, step, nullptr};
    for (uint64_t b = 0; b < 2; ++b) want.push_back(compress::aesnoise::block(ctx.privateSeed(), b));
  }
  EXPECT_EQ(run(args), bytesOf(want));
}

}  // namespace
}  // namespace gradzip::experiments
