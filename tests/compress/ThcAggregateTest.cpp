// Multi-rank tests of compress/Thc (2–4 ranks over real Gloo, ThreadGroup.h):
// the homomorphism (compressed-domain aggregate = decompress-then-average of
// every rank's own quantised vector), bit-identical results on every rank, the
// error against the exact mean, saturation in the all-reduce form (never
// wraps; the count of saturated coordinates is exact), and the device-generic
// path aggregating as the CPU kernels do.
#include "tests/compress/AggregateHarness.h"
#include "compress/Thc.h"

#include "comm/Collective.h"
#include "compress/ThcTable.h"
#include "compress/kernels/Hadamard.h"
#include "compress/kernels/SaturatingPackedSum.h"
#include "tests/testing/ThreadGroup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace gradzip::compress {
namespace {

at::Tensor gather(comm::Communicator& c, const at::Tensor& t) { return gradzip::testing::gatherRanks(c, t); }

at::Tensor rankInput(int rank, int64_t d, uint64_t seed) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed + rank);
  return at::randn({d}, g);
}

// The all-reduce deployment with q = bits, fields of aggregationBits and
// 2^blockLog2 rotation blocks.
ThcOptions allReduceOptions(int bits, int aggregationBits, int blockLog2, const std::string& range = "norm") {
  ThcOptions o;
  o.deployment = "allreduce";
  o.bits = bits;
  o.aggregationBits = aggregationBits;
  o.rotationBlockLog2 = blockLog2;
  o.range = range;
  return o;
}

struct Outcome {
  at::Tensor x;         // this rank's input
  Aggregated r;
  uint64_t sharedSeed;  // the rotation's
};

// Aggregates rankInput(rank, d, 100) over `collective` ("none": the
// compressor's own) and checks what every THC form with headroom guarantees:
// nothing saturates, every rank gets a bit-identical mean, and the mean is
// the average of the workers' own decoded vectors (the homomorphism).
Outcome aggregateHomomorphic(comm::Communicator& c, Thc& thc, const std::string& collective, int64_t d) {
  std::unique_ptr<comm::Collective> coll;
  Context ctx{c};
  if (collective != "none") {
    coll = comm::makeCollective(collective, c);
    ctx.collective = coll.get();
    ctx.collectiveName = collective;
  }
  ctx.seed = 11;
  ctx.step = 2;
  auto x = rankInput(c.rank(), d, 100);
  auto r = thc.aggregate(x, ctx);
  EXPECT_EQ(r.saturated, 0) << collective;
  auto means = gather(c, r.mean);
  for (int i = 1; i < c.size(); ++i)
    EXPECT_TRUE(at::equal(means[i], means[0])) << collective << ": rank " << i << " differs";
  // Homomorphism: (1/n) Σ D(C(x_i)) = D((1/n) Σ C(x_i)), up to float rounding
  // of the two rotation orders (relative 1e-5 of the coordinate scale).
  auto local = gather(c, r.localApplied).mean(0);
  const double scale = local.abs().max().item<double>();
  EXPECT_LE((r.mean - local).abs().max().item<double>(), 1e-5 * scale) << collective;
  return {x, r, ctx.sharedSeed()};
}

// Against the exact mean, an expectation bound and a concentration bound for
// one realisation. Worker i's rotated block b has norm l_ib and the shared
// range M_b = t_p·max_i l_ib/sqrt(B) (THC Alg. 3). Its error is the clamping
// loss plus SQ noise on the grid m + T[z]·(2M/g), both in the rotated domain
// (RHT⁻¹ is orthonormal; dropping the padding only removes error). Relative
// to its own N(0, l²/B) coordinates the grid is stretched by ρ = M_b·sqrt(B)/
// (t_p·l_ib) >= 1, which scales the SQ variance by at most ρ² (the optimal
// tables are densest near 0) and only shrinks the clamping loss, so
// E||e_i||² <= ||x_i||²·((1 − p)·V·ρ²max + c(t_p)), V the table's normalised
// variance and c(t) = (1 + t²)p − 2tφ(t). The n workers' SQ noises are
// independent, so E||mean − exact||² <= Σ_i E||e_i||²/n² =: E. For the
// spread: the mean's SQ error per coordinate is bounded by Δ = the widest
// grid gap·2M/g, so Var Σ ē² <= Σ E ē⁴ <= Δ²·E, and the cross term with the
// clamping bias has sd <= Δ·sqrt(E) likewise: sd <= 2Δ·sqrt(E), and the test
// allows E + 6·2Δ·sqrt(E).
void checkHomomorphicAndIdentical(comm::Communicator& c, Thc& thc, const std::string& collective, int64_t d) {
  const auto o = aggregateHomomorphic(c, thc, collective, d);
  const auto& opt = thc.options();
  std::vector<int> table;
  int g;
  if (opt.deployment == "allreduce") {
    g = 2 * ((1 << (opt.bits - 1)) - 1);  // codes −L..L: 2L intervals
    for (int z = 0; z <= g; ++z) table.push_back(z);
  } else {
    g = thc.granularityFor(c.size());
    table = opt.variant == "uniform" ? uniformThcTable(opt.bits, opt.p).values
                                     : solveThcTable(opt.bits, g, opt.p, opt.symmetricTable).values;
  }
  int gap = 0;
  for (size_t z = 0; z + 1 < table.size(); ++z) gap = std::max(gap, table[z + 1] - table[z]);
  const double V = thcTableVariance(table, g, opt.p), t = thcTruncation(opt.p);
  const double clampLoss = (1 + t * t) * opt.p - 2 * t * std::exp(-t * t / 2) / std::sqrt(2 * M_PI);
  RandomizedHadamard rht(d, opt.rotationBlockLog2);
  auto xs = gather(c, o.x);
  at::Tensor padded = at::zeros({c.size(), rht.paddedDim()}, at::kDouble);
  padded.narrow(1, 0, d).copy_(xs);
  const at::Tensor l = padded.view({c.size(), rht.numBlocks(), rht.blockSize()}).norm(2, {2});  // [n, blocks]
  const at::Tensor lMax = std::get<0>(l.max(0));
  const double rho = (lMax / l).max().item<double>();
  const double n = c.size();
  const double E = xs.to(at::kDouble).square().sum().item<double>() * ((1 - opt.p) * V * rho * rho + clampLoss) / (n * n);
  const double Delta = gap * 2 * t * lMax.max().item<double>() / std::sqrt(double(rht.blockSize())) / g;
  const double err = (o.r.mean - xs.mean(0)).to(at::kDouble).square().sum().item<double>();
  EXPECT_LE(err, E + 12 * Delta * std::sqrt(E)) << collective;
}

TEST(ThcAggregate, ParameterServerIsHomomorphic) {
  testing::runRanks(3, [](comm::Communicator& c) {
    Thc thc(ThcOptions{});
    checkHomomorphicAndIdentical(c, thc, "none", 5000);  // padded to 8192, shards of 8-code groups
  });
}

TEST(ThcAggregate, ParameterServerUniformAndAutoGranularity) {
  testing::runRanks(4, [](comm::Communicator& c) {
    ThcOptions o;
    o.granularity = 0;
    Thc thc(o);
    checkHomomorphicAndIdentical(c, thc, "none", 777);
    o.variant = "uniform";
    Thc uni(o);
    checkHomomorphicAndIdentical(c, uni, "none", 777);
  });
}

TEST(ThcAggregate, AllReduceWithHeadroomIsHomomorphic) {
  // q = 4, b = 8: |Σ codes| <= 3·7 = 21 < 127, so saturation is impossible and
  // the aggregate is exact in the compressed domain, on every collective.
  testing::runRanks(3, [](comm::Communicator& c) {
    Thc thc(allReduceOptions(4, 8, 10));
    for (const char* coll : {"ring", "tree", "ps"}) checkHomomorphicAndIdentical(c, thc, coll, 3000);
  });
}

TEST(ThcAggregate, SaturationNeverWrapsAndIsCounted) {
  // Identical inputs on 2 ranks: both code vectors are close, so many
  // coordinates have |c_0 + c_1| > L = 7. With n = 2 each coordinate is
  // combined exactly once, so the clip count equals the number of saturated
  // coordinates, and the result is clip(c_0 + c_1) exactly. The workers' own
  // codes come from the same aggregation with 8-bit fields (same codes, no
  // clip); the saturating run's localApplied carries the clip losses
  // (ThcSaturationTest), so its codes sum to the clipped sum.
  testing::runRanks(2, [](comm::Communicator& c) {
    ThcOptions o;
    o.deployment = "allreduce";
    o.bits = 4;
    Thc thc(o);
    ThcOptions wideOptions = o;
    wideOptions.aggregationBits = 8;
    Thc wide(wideOptions);
    auto coll = comm::makeCollective("ring", c);
    Context ctx{c};
    ctx.collective = coll.get();
    ctx.collectiveName = "ring";
    ctx.step = 5;
    const int64_t d = 4096;  // a power of two: no padding, the rotation is invertible on localApplied
    auto x = rankInput(0, d, 7);
    auto r = thc.aggregate(x, ctx);
    auto raw = wide.aggregate(x, ctx);
    RandomizedHadamard rht(d);
    const double M = thcTruncation(1.0 / 32) * x.to(at::kDouble).norm().item<double>() / std::sqrt(double(d));
    const int L = 7;
    // Codes back from the decoded vectors: R(v)·L/M is integral up to rounding.
    auto codes = [&](const at::Tensor& v, double mult) {
      return at::round(rht.forward(v, ctx.sharedSeed()).to(at::kDouble) * (mult * L / M)).to(at::kInt);
    };
    auto own = gather(c, codes(raw.localApplied, 1.0));
    auto sum = own[0] + own[1];
    const int64_t expectSat = (sum.abs() > L).sum().item<int64_t>();
    EXPECT_GT(expectSat, d / 20);
    EXPECT_EQ(r.saturated, expectSat);
    auto got = codes(r.mean, 2.0);  // mean = S/2 · M/L
    EXPECT_TRUE(at::equal(got, sum.clamp(-L, L)));
    auto applied = gather(c, codes(r.localApplied, 1.0));
    EXPECT_TRUE(at::equal(applied[0] + applied[1], sum.clamp(-L, L)));
    auto means = gather(c, r.mean);
    EXPECT_TRUE(at::equal(means[0], means[1]));
  });
}

// range: max (end-to-end utility §3.2.2: the value range after rotation). With
// q = 4, b = 8 nothing saturates, so the aggregate is the compressed-domain
// sum; nothing is clamped (|R| <= M), so each worker's error is SQ noise alone:
// per coordinate at most (M/L)²/4 (uniform SQ with step M/L), and the mean of
// n independent workers has squared error <= Σ_blocks B·(M_b/L)²/(4n) in
// expectation. The realised error over 3072 coordinates sits well inside it
// (the average SQ variance is (M/L)²/6 for a uniform fraction, not 1/4).
TEST(ThcAggregate, AllReduceWithMaxRangeIsHomomorphicAndWithinTheSqBound) {
  testing::runRanks(3, [](comm::Communicator& c) {
    Thc thc(allReduceOptions(4, 8, 10, "max"));
    for (const char* collective : {"ring", "tree", "ps"}) {
      const int64_t d = 3000;
      const auto out = aggregateHomomorphic(c, thc, collective, d);
      // M per block = the largest |R| over the ranks, from the shared rotation.
      RandomizedHadamard rht(d, 10);
      auto rotated = gather(c, rht.forward(out.x, out.sharedSeed));
      auto M = rotated.abs().view({c.size(), rht.numBlocks(), rht.blockSize()}).amax({0, 2}).to(at::kDouble);
      const double L = 7;
      const double bound = (M / L).pow(2).sum().item<double>() * rht.blockSize() / (4.0 * c.size());
      auto exact = gather(c, out.x).mean(0);
      EXPECT_LE((out.r.mean - exact).pow(2).sum().item<double>(), bound) << collective;
    }
  });
}

// Why range: max exists: at b = q = 4 with n = 2 independent workers, THC's
// range (M = t_p·σ_block, t_p = 2.15 at p = 1/32) puts the codes' spread at
// 7/2.15 = 3.3 levels, so their sum leaves [−7, 7] for about 2(1 − Φ(7.5/4.6))
// = 10% of the coordinates; with the block maximum (about 3.9σ over 2 × 4096
// Gaussian coordinates) the spread is 1.8 levels and the sum leaves the range
// for about 2(1 − Φ(7.5/2.5)) = 0.3%. Asserted with wide margins: > 5% and < 1.5%
// over 2^16 coordinates.
TEST(ThcAggregate, MaxRangeSaturatesFarLessThanTheNormRange) {
  testing::runRanks(2, [](comm::Communicator& c) {
    const int64_t d = 1 << 16;
    auto x = rankInput(c.rank(), d, 31);
    std::map<std::string, double> share;
    for (const char* range : {"norm", "max"}) {
      Thc thc(allReduceOptions(4, 0, 12, range));
      auto coll = comm::makeCollective("ring", c);
      Context ctx{c};
      ctx.collective = coll.get();
      ctx.collectiveName = "ring";
      ctx.step = 4;
      share[range] = static_cast<double>(thc.aggregate(x, ctx).saturated) / d;
    }
    EXPECT_GT(share["norm"], 0.05);
    EXPECT_LT(share["max"], 0.015);
  });
}

// The device-generic path (compress/CodecPath.h) against the CPU kernels on
// 2 ranks with saturation (q = b = 4, correlated inputs). With range: max the
// block ranges are exact maxima, so both paths put the same words on the wire
// and decode them with the same float operations: the same mean, clip count
// and localApplied, bit for bit. With the norm range and in the ps
// deployment the norms may round differently in their last bit (another
// summation order); a range one ulp off moves a code only where the noise
// falls within about 1e-6 of its threshold, and one moved code changes every
// output coordinate by its step over sqrt(B) (about 0.2% of the mean's largest
// coordinate here), while wrong noise or a wrong range would move a step on
// every coordinate (about 10%): the two must agree within 1%.
TEST(ThcAggregate, GenericPathAggregatesAsTheKernels) {
  testing::runRanks(2, [](comm::Communicator& c) {
    const int64_t d = 3000;
    const at::Tensor x = rankInput(0, d, 51) + 0.3 * rankInput(c.rank(), d, 61);
    struct Case {
      const char* name;
      ThcOptions o;
      bool exact;
    };
    ThcOptions ps;
    const std::vector<Case> cases = {{"allreduce max", allReduceOptions(4, 0, 9, "max"), true},
                                     {"allreduce max, full rotation", allReduceOptions(3, 0, 0, "max"), true},
                                     {"allreduce norm", allReduceOptions(4, 0, 9), false},
                                     {"ps", ps, false}};
    for (const auto& k : cases) {
      SCOPED_TRACE(k.name);
      Thc fast(k.o), gen(k.o);
      fast.setCodecPath(CodecPath::Auto);
      gen.setCodecPath(CodecPath::Generic);
      auto coll = comm::makeCollective("ring", c);
      Context ctx{c};
      ctx.collective = coll.get();
      ctx.collectiveName = "ring";
      ctx.seed = 13;
      ctx.step = 1;
      const Aggregated rf = fast.aggregate(x, ctx), rg = gen.aggregate(x, ctx);
      if (k.exact) {
        EXPECT_GT(rf.saturated, 0);
        EXPECT_EQ(rf.saturated, rg.saturated);
        EXPECT_TRUE(testing::bitEqual(rf.mean, rg.mean));
        EXPECT_TRUE(testing::bitEqual(rf.localApplied, rg.localApplied));
      } else {
        const double scale = rf.mean.abs().max().item<double>();
        EXPECT_LE((rf.mean - rg.mean).abs().max().item<double>(), 0.01 * scale);
        EXPECT_LE((rf.localApplied - rg.localApplied).abs().max().item<double>(), 0.01 * scale);
      }
    }
  });
}

TEST(ThcAggregate, SaturatingPackedSumOverCollectives) {
  // Chosen contributions: at coordinates k % 3 == 0 ranks 0 and 1 send +7 and
  // the rest 0 (one clip, result 7 -- never a wrapped −2); at k % 3 == 1 they
  // send −7 (result −7, one clip); elsewhere rank r sends r − 1 (exact sum).
  for (int n : {2, 3, 4})
    testing::runRanks(n, [](comm::Communicator& c) {
      const int64_t d = 301;
      auto codes = at::zeros({d}, at::kInt);
      int64_t expectSat = 0;
      auto expect = at::zeros({d}, at::kInt);
      for (int64_t k = 0; k < d; ++k) {
        if (k % 3 == 0 || k % 3 == 1) {
          const int v = k % 3 == 0 ? 7 : -7;
          if (c.rank() < 2) codes[k] = v;
          expect[k] = v;
          ++expectSat;
        } else {
          codes[k] = c.rank() - 1;
          int s = 0;
          for (int r = 0; r < c.size(); ++r) s += r - 1;
          expect[k] = std::max(-7, std::min(7, s));
        }
      }
      for (const char* name : {"ring", "tree", "ps"}) {
        auto coll = comm::makeCollective(name, c);
        SaturatingPackedSum sat(4);
        auto out = coll->allReduce(SaturatingPackedSum::pack(codes, 4), sat);
        EXPECT_TRUE(at::equal(SaturatingPackedSum::unpack(out, 4, d), expect)) << name;
        auto count = at::tensor({sat.clipped()}, at::kLong);
        c.allReduce(count).wait();
        EXPECT_EQ(count.item<int64_t>(), expectSat) << name;
      }
    });
}

}  // namespace
}  // namespace gradzip::compress
