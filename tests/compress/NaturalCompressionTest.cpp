// Tests compress/NaturalCompression: C_nat's exact outcome probabilities
// (exhaustively over all 2^23 random words), E[C(t)²]/t² at the paper's points,
// special values, the 8-bit wire code, the deterministic variant, wire size,
// the composition bound after sparsification (Theorem 3), the ps /
// all-gather aggregations on 3 ranks against their exact expected errors, and
// the device-generic codec path (compress/NaturalCompressionGeneric.cpp): its
// codes are naturalEncode's for its counter-RNG noise, its decoder is
// naturalDecode, and the deterministic variant and the ps owner (sum,
// saturation, re-compression) give the CPU path's bits.
#include "compress/NaturalCompression.h"

#include "comm/LocalCommunicator.h"
#include "compress/kernels/CounterRng.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

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

// E[C_nat(t)²] exactly: |t| = 2^a·(1 + f), f in [0, 1), rounds to 2^a with
// probability 1 − f and to 2^(a+1) with probability f, so E = 4^a·(1 + 3f).
double natSecondMoment(double t) {
  if (t == 0) return 0;
  int e;
  const double m = std::frexp(std::fabs(t), &e);  // |t| = m·2^e, m in [0.5, 1)
  const double a = std::ldexp(1.0, e - 1), f = 2 * m - 1;
  return a * a * (1 + 3 * f);
}

// The natural-compression paper's Theorem 3 for C_nat after random
// sparsification S^q (Definition 5: keep a uniformly random q of the d
// coordinates, scaled by d/q; S^q ∈ B(d/q − 1), Theorem 10): C_nat∘S^q ∈
// B(ω), ω = (1/8)(d/q − 1) + 1/8 + d/q − 1 = 9d/(8q) − 1 (its Eq. 18). The
// composition's exact second moment is E||C_nat(S^q(x))||² = (q/d)·Σ_k
// E[C_nat((d/q)x_k)²] (each coordinate is kept with probability q/d), which
// must not exceed (ω + 1)||x||², and equals it when every (d/q)x_k is 4/3
// times a power of two (Theorem 1's worst case 9/8). The compressor's own
// encode/decode applies C_nat; over T trials (fresh subset, fresh noise) the
// Monte-Carlo second moment lies within 5 standard errors (from the trials'
// spread) of the exact one, and the average is unbiased: ||mean − x||²·T
// concentrates at E||C(x) − x||² = (q/d)·Σ E[C_nat²] − ||x||² (ratio within
// ±sqrt(2/d) = ±0.044 of 1 at d = 1024), so < 1.5 times it is > 10 sd.
TEST(NaturalCompression, CompositionAfterSparsificationMeetsTheorem3) {
  comm::LocalCommunicator local;
  NaturalCompression cnat(NaturalCompressionOptions{});
  const int64_t d = 1024, q = 128, T = 400;
  const double scale = double(d) / q, omega = 9.0 * d / (8.0 * q) - 1;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
  const at::Tensor gaussian = at::randn({d}, gen);
  // The worst case: (d/q)·x_k = ±(4/3)·2^a with a in {−1, 0, 1}.
  const at::Tensor worst = (at::randint(-1, 2, {d}, gen).to(at::kFloat).exp2() *
                            (at::randint(0, 2, {d}, gen).to(at::kFloat) * 2 - 1) * (4.0f / 3)) /
                           static_cast<float>(scale);
  for (const auto& [name, x] : {std::pair<std::string, at::Tensor>{"gaussian", gaussian}, {"worst case", worst}}) {
    SCOPED_TRACE(name);
    const at::Tensor xd = x.to(at::kDouble);
    const double norm2 = xd.square().sum().item<double>();
    double exact = 0;
    for (int64_t k = 0; k < d; ++k) exact += natSecondMoment(scale * x[k].item<float>()) / scale;
    EXPECT_LE(exact, (omega + 1) * norm2 * (1 + 1e-12));
    at::Tensor sum = at::zeros({d}, at::kDouble);
    std::vector<double> second;
    for (int64_t t = 0; t < T; ++t) {
      Context ctx{local};
      ctx.step = t;
      const at::Tensor keep = at::randperm(d, gen).narrow(0, 0, q);
      at::Tensor s = at::zeros({d});
      s.index_put_({keep}, x.index_select(0, keep) * static_cast<float>(scale));
      const at::Tensor y = cnat.decode(cnat.encode(s, ctx), d, ctx).to(at::kDouble);
      sum += y;
      second.push_back(y.square().sum().item<double>());
    }
    const at::Tensor m2 = at::tensor(second, at::kDouble);
    const double mc = m2.mean().item<double>(), se = m2.std().item<double>() / std::sqrt(double(T));
    EXPECT_NEAR(mc, exact, 5 * se);
    const double biasSq = (sum / T - xd).square().sum().item<double>();
    EXPECT_LT(biasSq * T, 1.5 * (exact - norm2));
    if (name == "worst case") {
      EXPECT_NEAR(exact / norm2, omega + 1, 1e-6);  // the bound is attained
    }
  }
}

// The central moments of C_nat(t) (error ε = C_nat(t) − t, zero mean): for
// |t| = 2^a(1 + f), |ε| = 2^a − |t| = −2^a f with probability 1 − f and
// 2^(a+1) − |t| with probability f; the sign of t flips odd moments.
struct NatMoments {
  double v = 0, m3 = 0, m4 = 0;
};
NatMoments natMoments(double t) {
  if (t == 0) return {};
  int e;
  std::frexp(std::fabs(t), &e);
  const double lo = std::ldexp(1.0, e - 1), f = std::fabs(t) / lo - 1;
  const double el = lo - std::fabs(t), eh = 2 * lo - std::fabs(t), s = t < 0 ? -1 : 1;
  return {(1 - f) * el * el + f * eh * eh, s * ((1 - f) * el * el * el + f * eh * eh * eh),
          (1 - f) * el * el * el * el + f * eh * eh * eh * eh};
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
      // Exact expectations for this input instead of B(1/8)'s worst case. Uplink:
      // independent C_nat per worker, so the error S_k = (1/n)Σ_i ε_ik of the
      // uplink mean has E S_k² = Σ_i v_ik/n² and E S_k⁴ = (Σ_i μ4_ik +
      // 3Σ_{i≠j} v_ik v_jk)/n⁴ (two-point ε, natMoments). allgather: the error
      // is ||S||², concentrated within 6 sd (Var = Σ_k E S_k⁴ − (E S_k²)²) of
      // its expectation. ps: the owner re-rounds the uplink mean m̂ (= the mean
      // of the workers' localApplied), so given m̂ the error is ||m̂ − exact +
      // ε'||² with fresh C_nat noise ε': expectation ||m̂ − exact||² + Σ v(m̂_k),
      // variance Σ Var(2δ_k ε'_k + ε'_k²) = Σ 4δ²v + 4δμ3 + μ4 − v² with δ_k
      // = m̂_k − exact_k; and ||m̂ − exact||² is the allgather case's error.
      const double n = c.size();
      const at::Tensor xd = xs.to(at::kDouble).contiguous();
      const auto xa = xd.accessor<double, 2>();
      double uplinkMean = 0, uplinkVar = 0;
      for (int64_t k = 0; k < x.numel(); ++k) {
        double v = 0, m4 = 0, vv = 0;
        for (int i = 0; i < c.size(); ++i) {
          const NatMoments mi = natMoments(xa[i][k]);
          v += mi.v;
          m4 += mi.m4;
          vv += mi.v * mi.v;
        }
        const double s2 = v / (n * n), s4 = (m4 + 3 * (v * v - vv)) / (n * n * n * n);
        uplinkMean += s2;
        uplinkVar += s4 - s2 * s2;
      }
      const auto up = gather(c, r.localApplied).to(at::kDouble).mean(0);
      const double upErr = (up - exact.to(at::kDouble)).square().sum().item<double>();
      EXPECT_NEAR(upErr, uplinkMean, 6 * std::sqrt(uplinkVar)) << coll;
      const double err = (r.mean - exact).to(at::kDouble).square().sum().item<double>();
      if (std::string(coll) == "ps") {
        const at::Tensor mHat = up.to(at::kFloat).to(at::kDouble).contiguous();  // the owner's float mean
        const at::Tensor ex = exact.to(at::kDouble).contiguous();
        const auto ma = mHat.accessor<double, 1>(), ea = ex.accessor<double, 1>();
        const double upHat = (mHat - ex).square().sum().item<double>();
        double down = 0, downVar = 0;
        for (int64_t k = 0; k < x.numel(); ++k) {
          const double dev = ma[k] - ea[k];
          const NatMoments m = natMoments(ma[k]);
          down += m.v;
          downVar += 4 * dev * dev * m.v + 4 * dev * m.m3 + m.m4 - m.v * m.v;
        }
        EXPECT_NEAR(err, upHat + down, 6 * std::sqrt(downVar)) << coll;
      } else {
        EXPECT_NEAR(err, upErr, 1e-5 * upErr) << coll;  // the same errors, rounded to float
      }
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

// Gaussian values of widely spread magnitude and C_nat's edge cases: zeros of
// both signs, values below 2^−50 and at it, subnormals, powers of two, values
// above the 2^10 clip and near FLT_MAX.
at::Tensor edgeInput(int64_t d, uint64_t seed) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto x = at::randn({d}, g).mul_(at::randn({d}, g).mul_(12).exp2_());
  const std::vector<float> edges = {0.0f, -0.0f, std::ldexp(1.0f, -50), -std::ldexp(1.0f, -51), std::ldexp(3.0f, -53),
                                    1e-40f, -FLT_TRUE_MIN, 1.0f, -0.75f, 1024.0f, 1536.0f, -3000.0f, FLT_MAX, -FLT_MAX};
  for (int64_t i = 0; i < std::min<int64_t>(d, static_cast<int64_t>(edges.size())); ++i) x[i] = edges[i];
  return x;
}

// The generic encoder computes naturalEncode of every coordinate with 23
// random bits from randomHalf(privateSeed, i), and the generic decoder is
// naturalDecode on every one of the 256 codes.
TEST(NaturalCompression, GenericCodecIsTheScalarDefinition) {
  comm::LocalCommunicator local;
  Context ctx{local};
  ctx.seed = 5;
  ctx.step = 3;
  NaturalCompression cnat(NaturalCompressionOptions{});
  cnat.setCodecPath(CodecPath::Generic);
  const auto x = edgeInput(3001, 8);
  const auto codes = cnat.encode(x, ctx).tensors.at(0);
  ASSERT_EQ(codes.scalar_type(), at::kByte);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const uint64_t rnd = randomHalf(ctx.privateSeed(), static_cast<uint64_t>(i));
    ASSERT_EQ(codes[i].item<uint8_t>(), naturalEncode(x[i].item<float>(), rnd, true)) << "i " << i;
  }
  Payload all;
  all.tensors.push_back(at::arange(256, at::kInt).to(at::kByte));
  const auto decoded = cnat.decode(all, 256, ctx);
  NaturalCompression cpu(NaturalCompressionOptions{});
  cpu.setCodecPath(CodecPath::Auto);
  EXPECT_TRUE(testing::bitEqual(decoded, cpu.decode(all, 256, ctx)));
  for (int k = 0; k < 256; ++k) {
    const float want = naturalDecode(static_cast<uint8_t>(k));
    const float got = decoded[k].item<float>();
    EXPECT_EQ(std::memcmp(&want, &got, 4), 0) << "code " << k;
  }
}

// Deterministic rounding uses no noise: the same codes on both paths.
TEST(NaturalCompression, GenericDeterministicGivesTheSameBits) {
  for (int64_t d : {1, 5, 14, 64, 1001, 4099}) {
    SCOPED_TRACE("d " + std::to_string(d));
    testing::expectSameBitsOnBothPaths("cnat", "deterministic: true", edgeInput(d, 20 + d), 1);
  }
}

// The ps owner's work (exact int64 sum, saturation, re-compression with
// splitmix noise) is the CPU owner's on the generic path: with deterministic
// uplinks every aggregate is bit-identical, on 3 ranks and on 9 ranks that
// all send 2^10 (their int64 sum overflows and saturates).
TEST(NaturalCompression, GenericAggregationMatchesTheCpuPath) {
  for (int n : {3, 9}) {
    testing::runRanks(n, [n](comm::Communicator& c) {
      for (const std::string form : {"ps", "allgather"})
        for (const std::string det : {"true", "false"}) {
          if (det == "false" && form == "allgather") continue;  // stochastic uplinks differ by design
          const std::string yaml = "deployment: " + form + "\ndeterministic: " + det;
          auto fast = makeCompressor("cnat", yaml + "\ncodec: auto");
          auto generic = makeCompressor("cnat", yaml + "\ncodec: generic");
          const auto x = n == 9 ? at::full({37}, 1024.0f) : edgeInput(1003, 60 + c.rank());
          Context cf{c}, cg{c};
          cf.seed = cg.seed = 4;
          const auto rf = fast->aggregate(x, cf);
          const auto rg = generic->aggregate(x, cg);
          // Equal uplinks (deterministic, or 2^10 exactly) give equal downlink clip counts.
          if (det == "true" || n == 9) {
            EXPECT_EQ(rf.saturated, rg.saturated) << form << " det " << det;
          }
          if (n == 9 && form == "ps") {
            EXPECT_GT(rg.saturated, 0);
          }
          if (det == "false") {
            // Different uplink noise; the generic mean is still the same on every rank.
            testing::expectIdenticalAcrossRanks(c, rg.mean);
            continue;
          }
          EXPECT_TRUE(testing::bitEqual(rf.mean, rg.mean)) << form << " n " << n;
          EXPECT_TRUE(testing::bitEqual(rf.localApplied, rg.localApplied)) << form << " n " << n;
        }
    });
  }
}

}  // namespace
}  // namespace gradzip::compress
