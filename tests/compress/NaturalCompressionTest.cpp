// Tests compress/NaturalCompression: C_nat's exact outcome probabilities
// (exhaustively over all 2^23 random words), E[C(t)²]/t² at the paper's points,
// special values, the 8-bit wire code, the deterministic variant, wire size,
// and the ps / all-gather aggregations on 3 ranks.
#include "compress/NaturalCompression.h"

#include "comm/LocalCommunicator.h"
#include "compress/CounterRng.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

namespace gradzip::compress {
namespace {

// E[C(t)] and E[C(t)²] of naturalRound over every r in [0, 2^23): the exact
// expectation of this implementation's probabilities.
std::pair<double, double> exactMoments(float t) {
  double m1 = 0, m2 = 0;
  for (uint32_t r = 0; r < (1u << 23); ++r) {
    const double c = naturalRound(t, r);
    m1 += c;
    m2 += c * c;
  }
  return {m1 / (1u << 23), m2 / (1u << 23)};
}

TEST(NaturalCompression, ExactExpectationAtPaperPoints) {
  // Definition 1: 2^a with probability (2^(a+1) − |t|)/2^a. t = 4/3: 1 w.p. 2/3,
  // 2 w.p. 1/3: E[C²] = 2, ratio 9/8 (the worst case, B(1/8)). t = −2.75:
  // −2 w.p. 5/8, −4 w.p. 3/8: E[C²] = 8.5, ratio 8.5/7.5625 = 1.12397.
  // The exhaustive sum is exact in double; t is the float nearest 4/3, so the
  // ratio differs from 9/8 by ~1e-7.
  for (auto [t, ratio] : {std::pair<float, double>{4.0f / 3, 9.0 / 8}, {-2.75f, 8.5 / 7.5625}, {0.75f, 10.0 / 9}}) {
    auto [m1, m2] = exactMoments(t);
    EXPECT_NEAR(m1, t, 1e-12 * std::fabs(t)) << t;  // unbiased exactly
    EXPECT_NEAR(m2 / (double(t) * t), ratio, 1e-6) << t;
  }
  EXPECT_NEAR(8.5 / 7.5625, 1.12397, 5e-6);
}

TEST(NaturalCompression, MonteCarloMatchesExactMoments) {
  // 10^6 coordinates all equal to t through the compressor's own noise. For
  // t = 4/3: Var C = 2 − 16/9 = 2/9, Var C² = E[C⁴] − 4 = 6 − 4 = 2; the means
  // of 10^6 draws have std sqrt(2/9)/1000 and sqrt(2)/1000; assert 5 sigma.
  comm::LocalCommunicator local;
  Context ctx{local};
  NaturalCompression cnat(NaturalCompressionOptions{});
  const int64_t N = 1000000;
  auto x = at::full({N}, 4.0f / 3);
  auto y = cnat.decode(cnat.encode(x, ctx), N, ctx).to(at::kDouble);
  EXPECT_NEAR(y.mean().item<double>(), 4.0 / 3, 5 * std::sqrt(2.0 / 9) / 1000);
  EXPECT_NEAR(y.pow(2).mean().item<double>(), 2.0, 5 * std::sqrt(2.0) / 1000);
}

TEST(NaturalCompression, SpecialValues) {
  EXPECT_EQ(naturalRound(0.0f, 123), 0.0f);
  EXPECT_TRUE(std::signbit(naturalRound(-0.0f, 123)));
  EXPECT_EQ(naturalRound(INFINITY, 5), INFINITY);
  EXPECT_EQ(naturalRound(-INFINITY, 5), -INFINITY);
  EXPECT_TRUE(std::isnan(naturalRound(NAN, 5)));
  // Powers of two are fixed points for every r.
  for (uint32_t r : {0u, 1u, 0x7FFFFFu}) EXPECT_EQ(naturalRound(0.25f, r), 0.25f);
  // Subnormal t = m·2^−149 rounds to 0 or 2^−126, up with probability m/2^23
  // (unbiased): count the r that round up.
  const float sub = std::ldexp(3.0f, -140);  // m = 3·2^9
  ASSERT_EQ(std::fpclassify(sub), FP_SUBNORMAL);
  int64_t up = 0;
  for (uint32_t r = 0; r < (1u << 23); ++r) {
    const float c = naturalRound(sub, r);
    ASSERT_TRUE(c == 0.0f || c == FLT_MIN);
    up += c == FLT_MIN;
  }
  EXPECT_EQ(up, 3 << 9);
  // Exponent overflow saturates at 2^127 instead of becoming inf.
  EXPECT_EQ(naturalRound(FLT_MAX, 0x7FFFFF), std::ldexp(1.0f, 127));
  EXPECT_EQ(naturalRound(-FLT_MAX, 0x7FFFFF), -std::ldexp(1.0f, 127));
  // The compressor refuses -Inf in encode and float16 input; NaN, +Inf, float64,
  // 2-D, strided and empty input: Compressor.BadInputGivesAClearError.
  comm::LocalCommunicator local;
  Context ctx{local};
  NaturalCompression cnat(NaturalCompressionOptions{});
  EXPECT_THROW(cnat.encode(at::tensor({-INFINITY}), ctx), UserError);
  EXPECT_THROW(cnat.aggregate(at::ones({3}, at::kHalf), ctx), UserError);
}

TEST(NaturalCompression, WireCode) {
  bool clipped = false;
  // Exact powers of two in range survive the byte.
  for (int e = kNatMinExp; e <= kNatMaxExp; ++e)
    for (float s : {1.0f, -1.0f}) {
      const float v = s * std::ldexp(1.0f, e);
      EXPECT_EQ(naturalDecode(naturalEncode(v, 0, true)), v);
      EXPECT_EQ(naturalFixed(naturalEncode(v, 0, true)), int64_t(s) << (e + 50));
    }
  EXPECT_EQ(naturalEncode(0.0f, 0, true), 0);
  EXPECT_EQ(naturalDecode(0), 0.0f);
  // Above 2^10: clipped (biased) and reported.
  EXPECT_EQ(naturalDecode(naturalEncode(5000.0f, 0, true, &clipped)), 1024.0f);
  EXPECT_TRUE(clipped);
  // Below 2^−50: 2^−50 with probability |t|/2^−50 (here 1/4), else 0.
  const float tiny = std::ldexp(1.0f, -52);
  int64_t up = 0;
  const int64_t N = 400000;
  for (int64_t i = 0; i < N; ++i) up += naturalEncode(tiny, randomBits(77, i), true) != 0;
  EXPECT_NEAR(double(up) / N, 0.25, 5 * std::sqrt(0.25 * 0.75 / N));
}

TEST(NaturalCompression, DeterministicVariantRoundsToNearest) {
  EXPECT_EQ(naturalRoundNearest(1.4f), 1.0f);
  EXPECT_EQ(naturalRoundNearest(1.5f), 2.0f);  // 1.5·2^a rounds up
  EXPECT_EQ(naturalRoundNearest(-3.0f), -4.0f);
  EXPECT_EQ(naturalRoundNearest(-2.9f), -2.0f);
  comm::LocalCommunicator local;
  Context ctx{local};
  NaturalCompressionOptions o;
  o.deterministic = true;
  NaturalCompression det(o);
  EXPECT_FALSE(det.capabilities().unbiased);
  auto x = at::tensor({1.4f, 1.5f, -3.0f, 0.0f});
  EXPECT_TRUE(at::equal(det.decode(det.encode(x, ctx), 4, ctx), at::tensor({1.0f, 2.0f, -4.0f, 0.0f})));
}

TEST(NaturalCompression, WireSizeIsEightBits) {
  comm::LocalCommunicator local;
  Context ctx{local};
  NaturalCompression cnat(NaturalCompressionOptions{});
  for (int64_t d : {1, 17, 1000}) {
    auto p = cnat.encode(at::randn({d}), ctx);
    EXPECT_DOUBLE_EQ(p.bytes() * 8.0 / d, cnat.bitsPerCoordinate(d, 4));
    EXPECT_DOUBLE_EQ(cnat.bitsPerCoordinate(d, 4), 8.0);
  }
}

at::Tensor gather(comm::Communicator& c, const at::Tensor& t) {
  std::vector<at::Tensor> out(c.size());
  for (auto& o : out) o = at::empty_like(t);
  c.allGather(out, t.contiguous()).wait();
  return at::stack(out);
}

TEST(NaturalCompression, AggregatesOnThreeRanks) {
  testing::runRanks(3, [](comm::Communicator& c) {
    NaturalCompression cnat(NaturalCompressionOptions{});
    for (const char* coll : {"ps", "allgather"}) {
      Context ctx{c};
      ctx.collectiveName = coll;
      ctx.step = 1;
      auto g = at::make_generator<at::CPUGeneratorImpl>(40 + c.rank());
      auto x = at::randn({20001}, g);
      auto r = cnat.aggregate(x, ctx);
      auto means = gather(c, r.mean);
      for (int i = 1; i < c.size(); ++i) EXPECT_TRUE(at::equal(means[i], means[0])) << coll;
      auto xs = gather(c, x);
      const auto exact = xs.mean(0);
      // Uplink: independent C_nat per worker, Var <= ||x_i||²/8 each (B(1/8)),
      // so V = Σ||x_i||²/(8n²). ps re-compresses the mean: + (||m||² + V)/8.
      const double n = c.size();
      const double V = xs.pow(2).sum().item<double>() / (8 * n * n);
      const double bound = std::string(coll) == "ps" ? V + (exact.pow(2).sum().item<double>() + V) / 8 : V;
      const double err = (r.mean - exact).pow(2).sum().item<double>();
      EXPECT_LE(err, bound) << coll;
      EXPECT_GT(err, 0.1 * bound) << coll;  // it did compress
      if (std::string(coll) == "allgather") {
        auto local = gather(c, r.localApplied).to(at::kDouble).mean(0).to(at::kFloat);
        EXPECT_TRUE(at::equal(local, r.mean));
      }
    }
    // The ps owner's int64 sum is exact: powers of two whose mean is a power
    // of two come back unchanged (deterministic variant, no re-rounding).
    NaturalCompressionOptions o;
    o.deterministic = true;
    NaturalCompression det(o);
    Context ctx{c};
    ctx.collectiveName = "ps";
    auto p = at::tensor({std::ldexp(1.0f, -50), 1024.0f, -0.5f, 0.0f, 3.0f});
    auto r = det.aggregate(p, ctx);
    EXPECT_TRUE(at::equal(r.mean, at::tensor({std::ldexp(1.0f, -50), 1024.0f, -0.5f, 0.0f, 4.0f})));
    Context bad{c};
    bad.collectiveName = "ring";
    EXPECT_THROW(cnat.aggregate(p, bad), UserError);
  });
}

}  // namespace
}  // namespace gradzip::compress
