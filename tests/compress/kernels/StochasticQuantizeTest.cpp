// Tests compress/kernels/StochasticQuantize: table SQ and uniform SQ are unbiased with
// the variance (y − lo)(hi − y), and independent of how the loop is chunked.
#include "compress/kernels/StochasticQuantize.h"

#include "compress/ThcTable.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gradzip::compress {
namespace {

constexpr int64_t kN = 200000;

TEST(StochasticQuantize, TableSqIsUnbiased) {
  const auto table = solveThcTable(4, 30, 1.0 / 32).values;  // ..., 13, 14, 16, ...
  TableQuantizer q(table);
  for (float y : {4.3f, 14.0f, 15.25f, 0.0f, 30.0f, 29.9f}) {
    std::vector<float> ys(kN, y);
    std::vector<uint8_t> z(kN);
    q.quantize(ys.data(), kN, 1234, 0, z.data());
    double sum = 0;
    for (auto c : z) sum += table[c];
    // Adjacent table values around y.
    int k = 0;
    while (k + 2 < static_cast<int>(table.size()) && table[k + 1] <= y) ++k;
    const double lo = table[k], hi = table[k + 1];
    for (auto c : z) ASSERT_TRUE(table[c] == lo || table[c] == hi) << "y " << y;
    // Mean of kN rounds has std sqrt((y − lo)(hi − y)/kN); 5 sigma, plus the
    // 2^-24 probability grid of the noise.
    const double sd = std::sqrt((y - lo) * (hi - y) / kN);
    EXPECT_NEAR(sum / kN, y, 5 * sd + (hi - lo) * 1e-6) << "y " << y;
  }
}

// roundUniform rounds y = a + j/2^24 up exactly for the j smallest of the 2^24
// values of k (probability j/2^24 = y − floor(y)), and a fraction below the
// grid up for every k but the largest (ceil), also for negative y whose
// y − floor(y) is not a float (-2^-30: 1 − 2^-30 rounds to 1).
TEST(StochasticQuantize, RoundUniformIsTheCeilRuleOnTheNoiseGrid) {
  for (int a : {-7, -1, 0, 3, 6})
    for (uint32_t j : {0u, 1u, 12345u, 8388608u, 16777215u}) {
      const float y = static_cast<float>(a) + static_cast<float>(j) / 16777216.0f;
      if (static_cast<double>(y) != a + j / 16777216.0) continue;  // not exact in float
      for (uint32_t k : {0u, j > 0 ? j - 1 : 0u, j, j + 1, 16777215u}) {
        if (k > 16777215u) continue;
        EXPECT_EQ(roundUniform(y, k), a + (k < j ? 1 : 0)) << a << " " << j << " " << k;
      }
    }
  for (uint32_t k : {0u, 77u, 16777215u}) {
    EXPECT_EQ(roundUniform(-std::ldexp(1.0f, -30), k), 0) << k;  // up with probability 1 (within 2^-24)
    EXPECT_EQ(roundUniform(std::ldexp(1.0f, -30), k), k == 0 ? 1 : 0) << k;  // ceil: 1/2^24
    EXPECT_EQ(roundUniform(0.0f, k), 0);
    EXPECT_EQ(roundUniform(-0.0f, k), 0);
  }
}

TEST(StochasticQuantize, UniformSqIsUnbiasedAndChunkingFree) {
  for (float y : {-2.7f, 0.5f, 3.0f, 6.999f}) {
    std::vector<float> ys(kN, y);
    std::vector<int32_t> out(kN), part(kN);
    quantizeUniform(ys.data(), kN, 99, 0, out.data());
    double sum = 0;
    for (auto c : out) sum += c;
    const double f = y - std::floor(y);
    EXPECT_NEAR(sum / kN, y, 5 * std::sqrt(f * (1 - f) / kN) + 1e-6);
    // The noise of element k depends only on (seed, offset + k).
    quantizeUniform(ys.data() + 1000, kN - 1000, 99, 1000, part.data());
    for (int64_t k = 0; k < kN - 1000; ++k) ASSERT_EQ(part[k], out[k + 1000]);
  }
}

}  // namespace
}  // namespace gradzip::compress
