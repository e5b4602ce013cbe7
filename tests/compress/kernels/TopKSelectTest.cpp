// Tests compress/kernels/TopKSelect.{h,cpp}: the selected set against at::topk's (on
// inputs without ties, where the set is unique), the tie rule (lower indices
// first) on inputs made of few distinct magnitudes, ascending order, NaN and
// Inf ranked above every finite value, the edge cases k = 0, 1, d and
// clamping, and the same indices on every SIMD tier the CPU has.
#include "compress/kernels/TopKSelect.h"
#include "tests/compress/kernels/SimdLevels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace gradzip::compress {
namespace {

std::vector<int32_t> toVector(const at::Tensor& t) {
  EXPECT_EQ(t.scalar_type(), at::kInt);
  return {t.data_ptr<int32_t>(), t.data_ptr<int32_t>() + t.numel()};
}

// The reference: a stable sort of the indices by descending |x| (NaN first),
// ties by ascending index, the first k of them, in ascending order.
std::vector<int32_t> reference(const at::Tensor& x, int64_t k) {
  const float* p = x.data_ptr<float>();
  std::vector<int32_t> ix(size_t(x.numel()));
  for (size_t i = 0; i < ix.size(); ++i) ix[i] = int32_t(i);
  const auto rank = [](float v) { return std::isnan(v) ? std::numeric_limits<float>::infinity() * 2 : std::abs(v); };
  std::stable_sort(ix.begin(), ix.end(), [&](int32_t a, int32_t b) {
    const float ra = rank(p[a]), rb = rank(p[b]);
    if (std::isnan(p[a]) != std::isnan(p[b])) return std::isnan(p[a]);
    return ra > rb;
  });
  ix.resize(size_t(k));
  std::sort(ix.begin(), ix.end());
  return ix;
}

TEST(TopKSelect, SameSetAsAtTopkWithoutTies) {
  testing::forEachSimdLevel([&] {
    for (int64_t d : {1, 15, 16, 17, 1000, 4097, 272186}) {
      at::manual_seed(uint64_t(d));
      // Log-normal magnitudes with random signs: gradient-like, ties (almost) impossible.
      const at::Tensor x = at::randn({d}).exp().mul(at::randn({d}).sign());
      for (double ratio : {0.001, 0.01, 0.1, 0.5}) {
        const int64_t k = std::max<int64_t>(1, int64_t(ratio * double(d)));
        const auto got = toVector(largestMagnitudes(x, k));
        auto want = toVector(std::get<1>(at::topk(x.abs(), k, 0, true, false)).to(at::kInt));
        std::sort(want.begin(), want.end());
        EXPECT_EQ(got, want) << "d " << d << " k " << k;
        EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
      }
    }
  });
}

TEST(TopKSelect, TiesGoToTheLowerIndices) {
  testing::forEachSimdLevel([&] {
    // Four magnitudes, both signs, and zeros: every threshold falls on a tie.
    at::manual_seed(5);
    const at::Tensor x = at::randint(-4, 5, {3001}).to(at::kFloat).mul(0.25f);
    for (int64_t k : {1, 2, 100, 700, 1500, 2999, 3000}) {
      EXPECT_EQ(toVector(largestMagnitudes(x, k)), reference(x, k)) << "k " << k;
    }
    // All equal (one bin, one key): the first k.
    const at::Tensor same = at::full({100}, -2.0f);
    std::vector<int32_t> first(7);
    for (int i = 0; i < 7; ++i) first[size_t(i)] = i;
    EXPECT_EQ(toVector(largestMagnitudes(same, 7)), first);
    // -0 and +0 are the same magnitude.
    const at::Tensor zeros = at::tensor({0.0f, -0.0f, 0.0f, -0.0f});
    EXPECT_EQ(toVector(largestMagnitudes(zeros, 3)), (std::vector<int32_t>{0, 1, 2}));
  });
}

TEST(TopKSelect, NanAndInfRankAboveFiniteValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  testing::forEachSimdLevel([&] {
    at::Tensor x = at::linspace(-1, 1, 40);
    x[3] = -inf;
    x[30] = nan;
    x[17] = 1e30f;
    EXPECT_EQ(toVector(largestMagnitudes(x, 1)), (std::vector<int32_t>{30}));
    EXPECT_EQ(toVector(largestMagnitudes(x, 2)), (std::vector<int32_t>{3, 30}));
    EXPECT_EQ(toVector(largestMagnitudes(x, 3)), (std::vector<int32_t>{3, 17, 30}));
  });
}

TEST(TopKSelect, EdgeCasesAndBadInput) {
  const at::Tensor x = at::tensor({3.0f, -1.0f, 2.0f});
  EXPECT_EQ(largestMagnitudes(x, 0).numel(), 0);
  EXPECT_EQ(toVector(largestMagnitudes(x, 3)), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(toVector(largestMagnitudes(x, 99)), (std::vector<int32_t>{0, 1, 2}));  // clamped to d
  EXPECT_EQ(toVector(largestMagnitudes(x, 2)), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(largestMagnitudes(at::empty({0}), 5).numel(), 0);
  EXPECT_THROW(largestMagnitudes(x.to(at::kDouble), 1), std::exception);
  EXPECT_THROW(largestMagnitudes(at::ones({4, 4}).t().reshape({16}).as_strided({8}, {2}), 1), std::exception);
}

}  // namespace
}  // namespace gradzip::compress
