// Tests compress/kernels/CounterRngGeneric: the ATen counter RNG draws the
// same words, 24-bit uniforms and 32-bit halves as the scalar functions of
// compress/kernels/CounterRng.h for the same (seed, counter), over offsets and
// counts that start and end on either half of a word, and seeds with the top
// bit set (which exercise the emulated unsigned arithmetic).
#include "compress/kernels/CounterRngGeneric.h"

#include "compress/kernels/CounterRng.h"

#include <gtest/gtest.h>

#include <vector>

namespace gradzip::compress {
namespace {

const std::vector<uint64_t> kSeeds = {0, 1, 0x9e3779b97f4a7c15ULL, ~uint64_t{0}, deriveSeed(7, 3)};
const at::Device kCpu(at::kCPU);

TEST(CounterRngGeneric, WordsMatchTheScalarStream) {
  for (uint64_t seed : kSeeds)
    for (int64_t offset : {0, 1, 1000003}) {
      const auto words = generic::randomBits(seed, offset, 257, kCpu);
      ASSERT_EQ(words.numel(), 257);
      ASSERT_EQ(words.scalar_type(), at::kLong);
      const int64_t* w = words.data_ptr<int64_t>();
      for (int64_t i = 0; i < 257; ++i)
        ASSERT_EQ(static_cast<uint64_t>(w[i]), randomBits(seed, static_cast<uint64_t>(offset + i)))
            << "seed " << seed << " i " << offset + i;
    }
}

TEST(CounterRngGeneric, ArbitraryCountersAndMix) {
  const auto counters = at::tensor({int64_t{5}, int64_t{0}, int64_t{1} << 40, int64_t{77}}, at::kLong);
  const auto words = generic::randomBitsAt(42, counters);
  for (int64_t k = 0; k < counters.numel(); ++k)
    EXPECT_EQ(static_cast<uint64_t>(words[k].item<int64_t>()),
              randomBits(42, static_cast<uint64_t>(counters[k].item<int64_t>())));
  const auto states = at::tensor({int64_t{0}, int64_t{-1}, int64_t{123456789}}, at::kLong);
  const auto mixed = generic::mix64(states);
  for (int64_t k = 0; k < states.numel(); ++k)
    EXPECT_EQ(static_cast<uint64_t>(mixed[k].item<int64_t>()), mix64(static_cast<uint64_t>(states[k].item<int64_t>())));
}

TEST(CounterRngGeneric, UniformsAndHalvesMatchBitForBit) {
  for (uint64_t seed : kSeeds)
    for (int64_t offset : {0, 1, 2, 999})
      for (int64_t count : {0, 1, 2, 3, 64, 129}) {
        const auto u = generic::uniform01(seed, offset, count, kCpu);
        const auto h = generic::randomHalf(seed, offset, count, kCpu);
        const auto uh = generic::uniform01Half(seed, offset, count, kCpu);
        ASSERT_EQ(u.numel(), count);
        ASSERT_EQ(h.numel(), count);
        ASSERT_EQ(uh.numel(), count);
        ASSERT_EQ(u.scalar_type(), at::kFloat);
        ASSERT_EQ(uh.scalar_type(), at::kFloat);
        for (int64_t k = 0; k < count; ++k) {
          const auto i = static_cast<uint64_t>(offset + k);
          ASSERT_EQ(u.data_ptr<float>()[k], uniform01(seed, i));
          ASSERT_EQ(static_cast<uint64_t>(h.data_ptr<int64_t>()[k]), uint64_t{randomHalf(seed, i)});
          ASSERT_EQ(uh.data_ptr<float>()[k], uniform01Half(seed, i));
        }
      }
}

TEST(CounterRngGeneric, LogicalShift) {
  const auto x = at::tensor({int64_t{-1}, int64_t{1} << 62, int64_t{-8}}, at::kLong);
  for (int k : {1, 30, 63}) {
    const auto y = generic::shiftRightLogical(x, k);
    for (int64_t j = 0; j < x.numel(); ++j)
      EXPECT_EQ(static_cast<uint64_t>(y[j].item<int64_t>()), static_cast<uint64_t>(x[j].item<int64_t>()) >> k);
  }
}

}  // namespace
}  // namespace gradzip::compress
