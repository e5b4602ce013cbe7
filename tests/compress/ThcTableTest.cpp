// Tests compress/ThcTable: the exact table solver against THC's published
// (4, 30, 1/32) table and the digest's variance figures, t_p values, and the
// table invariants (monotone, endpoints, reflection).
#include "compress/ThcTable.h"

#include "util/Error.h"

#include <gtest/gtest.h>

namespace gradzip::compress {
namespace {

TEST(ThcTable, TruncationMatchesNormalQuantiles) {
  // DIGEST §1: t_p for p = 1/16, 1/32, 1/64, 1/512, 1/1024 (4 printed decimals).
  EXPECT_NEAR(thcTruncation(1.0 / 16), 1.8627, 5e-5);
  EXPECT_NEAR(thcTruncation(1.0 / 32), 2.1539, 5e-5);
  EXPECT_NEAR(thcTruncation(1.0 / 64), 2.4176, 5e-5);
  EXPECT_NEAR(thcTruncation(1.0 / 512), 3.0973, 5e-5);
  EXPECT_NEAR(thcTruncation(1.0 / 1024), 3.2972, 5e-5);
  EXPECT_NEAR(inverseNormalCdf(0.5), 0.0, 1e-14);
  EXPECT_NEAR(inverseNormalCdf(0.975), 1.959963984540054, 1e-12);
}

TEST(ThcTable, ReproducesPaperTableSymmetric) {
  const auto t = solveThcTable(4, 30, 1.0 / 32, true);
  const std::vector<int> expected = {0, 3, 5, 7, 9, 11, 13, 14, 16, 17, 19, 21, 23, 25, 27, 30};
  EXPECT_EQ(t.values, expected);
  // 0.013496 printed to 6 decimals: |error| <= 5e-7.
  EXPECT_NEAR(t.normalizedVariance, 0.013496, 5e-7);
  for (int z = 0; z < 16; ++z) EXPECT_EQ(t.values[15 - z], 30 - t.values[z]);
}

TEST(ThcTable, UnconstrainedIsBetterAndContainsMidpoint) {
  const auto t = solveThcTable(4, 30, 1.0 / 32, false);
  EXPECT_NEAR(t.normalizedVariance, 0.013484, 5e-7);
  EXPECT_NE(std::find(t.values.begin(), t.values.end(), 15), t.values.end());
  // (4, 18, 1/32): 0.0134 unconstrained vs 0.0170 symmetric (digest, 4 decimals).
  EXPECT_NEAR(solveThcTable(4, 18, 1.0 / 32, false).normalizedVariance, 0.0134, 5e-5);
  EXPECT_NEAR(solveThcTable(4, 18, 1.0 / 32, true).normalizedVariance, 0.0170, 5e-5);
}

TEST(ThcTable, SolverIsOptimalOnSmallCase) {
  // Brute force over all strictly increasing tables for b = 2, g = 7: the DP's
  // optimum must equal the enumerated minimum.
  const double p = 1.0 / 16;
  double best = 1e9;
  for (int a = 1; a < 7; ++a)
    for (int b = a + 1; b < 7; ++b) best = std::min(best, thcTableVariance({0, a, b, 7}, 7, p));
  EXPECT_DOUBLE_EQ(solveThcTable(2, 7, p, false).normalizedVariance, best);
  // The paper's b = 2, g = 4 example T = [0,1,3,4] is the symmetric optimum there.
  EXPECT_EQ(solveThcTable(2, 4, p, true).values, (std::vector<int>{0, 1, 3, 4}));
}

TEST(ThcTable, TableInvariantsAndErrors) {
  for (int g : {15, 16, 38, 51}) {
    const auto t = solveThcTable(4, g, 1.0 / 64, true);
    ASSERT_EQ(t.values.size(), 16u);
    EXPECT_EQ(t.values.front(), 0);
    EXPECT_EQ(t.values.back(), g);
    for (int z = 0; z + 1 < 16; ++z) EXPECT_LT(t.values[z], t.values[z + 1]);
  }
  // g = 2^b − 1 forces the identity table (uniform THC).
  EXPECT_EQ(solveThcTable(3, 7, 0.1, true).values, uniformThcTable(3, 0.1).values);
  EXPECT_THROW(solveThcTable(4, 14, 1.0 / 32), UserError);
  EXPECT_THROW(solveThcTable(4, 30, 0.0), UserError);
}

}  // namespace
}  // namespace gradzip::compress
