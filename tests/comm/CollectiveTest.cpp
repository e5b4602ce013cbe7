// Tests the reductions of comm/Collective.h's algorithms (ring, tree, parameter
// server, engine) on real Gloo groups of 2, 3 and 4 ranks: closed-form sums for
// every reduction and dtype, lengths not divisible by the world size and of 0
// and 1 elements, bit-identical results on every rank (compared through the
// engine's all-gather of the result bytes), and agreement with c10d's own
// all-reduce within float rounding.
#include "comm/Collective.h"
#include "comm/EngineAllReduce.h"
#include "tests/comm/CollectiveTesting.h"
#include "tests/testing/ThreadGroup.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gradzip::comm {
namespace {

using gradzip::testing::runRanks;
using namespace gradzip::comm::testutil;

// Rank r contributes (r+1)·(i mod 5 - 2); the sum is n(n+1)/2·(i mod 5 - 2),
// small integers that every float dtype holds exactly, so any order is exact.
TEST(CollectiveTest, FloatSumClosedForm) {
  for (int n : kWorldSizes) {
    runRanks(n, [n](Communicator& c) {
      const int r = c.rank();
      for (const auto& algo : withEngine()) {
        auto coll = makeAlgo(algo, c);
        for (auto dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
          for (int64_t len : lengthsFor(n)) {
            at::Tensor pattern = at::arange(len, at::kLong).remainder(5) - 2;
            at::Tensor out = coll->allReduce(((r + 1) * pattern).to(dt), *floatSum());
            const auto what = where(algo, dt, len, n);
            EXPECT_EQ(out.scalar_type(), dt) << what;
            EXPECT_TRUE(at::equal(out, (n * (n + 1) / 2 * pattern).to(dt))) << what;
            expectSameOnAllRanks(c, out, what);
          }
        }
      }
    });
  }
}

// Random normal data: each algorithm against c10d's all-reduce. Summing n
// values in any order with rounding after each addition errs by at most
// γ_{n-1}·Σ|x| with γ_k = ku/(1-ku) (Higham, Accuracy and Stability, §4.2), u
// the unit roundoff; two such sums differ by at most 2γ_{n-1}·Σ|x|. Half adds an
// absolute error of half its smallest subnormal (2^-25) per addition.
TEST(CollectiveTest, FloatSumMatchesEngineWithinRounding) {
  struct Case {
    at::ScalarType dt;
    int64_t len;
    double u, tiny;
  };
  const std::vector<Case> cases = {{at::kFloat, 100003, std::ldexp(1.0, -24), 0},
                                   {at::kDouble, 1003, std::ldexp(1.0, -53), 0},
                                   {at::kHalf, 1003, std::ldexp(1.0, -11), std::ldexp(1.0, -25)},
                                   {at::kBFloat16, 1003, std::ldexp(1.0, -8), 0}};
  for (int n : kWorldSizes) {
    runRanks(n, [n, &cases](Communicator& c) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + c.rank());
      EngineAllReduce engine(c);
      for (const auto& k : cases) {
        at::Tensor x = at::randn({k.len}, gen, at::kFloat).to(k.dt);
        at::Tensor reference = engine.allReduce(x, *floatSum());
        at::Tensor absSum = x.abs().to(at::kDouble);
        c.allReduce(absSum).wait();
        const double g = (n - 1) * k.u / (1 - (n - 1) * k.u);
        at::Tensor bound = 2 * g * absSum + 2 * (n - 1) * k.tiny;
        for (const auto& algo : kPointToPoint) {
          if (k.len > 10000 && algo.find("-seg") != std::string::npos) continue;  // 1000s of 64-byte messages
          at::Tensor out = makeAlgo(algo, c)->allReduce(x, *floatSum());
          at::Tensor err = (out.to(at::kDouble) - reference.to(at::kDouble)).abs();
          EXPECT_TRUE((err <= bound).all().item<bool>())
              << where(algo, k.dt, k.len, n) << ": max error " << err.max().item<double>();
          expectSameOnAllRanks(c, out, where(algo, k.dt, k.len, n));
        }
      }
    });
  }
}

// Integer extremes of each input dtype, summed in a wider accumulator: rank r
// contributes hi - r at even and lo + r at odd positions, so the sums
// n·hi - n(n-1)/2 and n·lo + n(n-1)/2 overflow the input dtype but not `wide`.
TEST(CollectiveTest, WideIntSumClosedForm) {
  struct Case {
    at::ScalarType in, wide;
    int64_t lo, hi;
  };
  const std::vector<Case> cases = {{at::kChar, at::kInt, -128, 127},
                                   {at::kByte, at::kInt, 0, 255},
                                   {at::kChar, at::kLong, -128, 127},
                                   {at::kByte, at::kLong, 0, 255},
                                   {at::kShort, at::kInt, -32768, 32767},
                                   {at::kInt, at::kLong, -2147483648LL, 2147483647LL},
                                   {at::kLong, at::kLong, -(int64_t{1} << 60), int64_t{1} << 60}};
  for (int n : kWorldSizes) {
    runRanks(n, [n, &cases](Communicator& c) {
      const int64_t r = c.rank(), tri = int64_t{n} * (n - 1) / 2;
      for (const auto& algo : withEngine()) {
        auto coll = makeAlgo(algo, c);
        for (const auto& k : cases) {
          auto red = wideIntSum(k.wide);
          for (int64_t len : lengthsFor(n)) {
            at::Tensor even = at::arange(len, at::kLong).remainder(2) == 0;
            // uint8 contributions count down from 255 at every position.
            const int64_t loR = k.in == at::kByte ? k.hi - r : k.lo + r;
            const int64_t loSum = k.in == at::kByte ? n * k.hi - tri : n * k.lo + tri;
            at::Tensor x = at::where(even, at::full({len}, k.hi - r, at::kLong), at::full({len}, loR, at::kLong));
            at::Tensor expected =
                at::where(even, at::full({len}, n * k.hi - tri, at::kLong), at::full({len}, loSum, at::kLong));
            at::Tensor out = coll->allReduce(x.to(k.in), *red);
            const auto what = where(algo, k.in, len, n) + " -> " + c10::toString(k.wide);
            EXPECT_EQ(out.scalar_type(), k.wide) << what;
            EXPECT_TRUE(at::equal(out, expected.to(k.wide))) << what;
            expectSameOnAllRanks(c, out, what);
          }
        }
      }
    });
  }
}

// Per position i every rank contributes the same sign s_i, magnitude
// m = (stride·(i/2) + 3r) mod (lim+1). A chain of same-sign saturating adds equals
// s_i·min(lim, Σ m) whatever the order, and the exact sums exceed lim at many
// positions: the result must clamp, and never wrap or flip sign.
TEST(CollectiveTest, SaturatingAddClampsNeverWraps) {
  struct Case {
    int bits;
    at::ScalarType dt;
  };
  for (int n : kWorldSizes) {
    runRanks(n, [n](Communicator& c) {
      for (const auto& algo : kPointToPoint) {
        auto coll = makeAlgo(algo, c);
        for (const Case& k : {Case{4, at::kChar}, Case{8, at::kChar}, Case{12, at::kShort}}) {
          const int64_t lim = (int64_t{1} << (k.bits - 1)) - 1;
          auto red = saturatingAdd(k.bits);
          for (int64_t len : lengthsFor(n)) {
            at::Tensor i = at::arange(len, at::kLong);
            at::Tensor sign = 2 * i.remainder(2) - 1;
            const int64_t stride = std::max<int64_t>(1, (lim + 1) / 128);  // reach lim within 1003 elements
            auto magnitude = [&](int64_t rank) {
              return (stride * i.div(2, "floor") + 3 * rank).remainder(lim + 1);
            };
            at::Tensor total = at::zeros({len}, at::kLong);
            for (int q = 0; q < n; ++q) total += magnitude(q);
            at::Tensor expected = sign * total.clamp_max(lim);
            at::Tensor out = coll->allReduce((sign * magnitude(c.rank())).to(k.dt), *red);
            const auto what = where(algo, k.dt, len, n) + fmt::format(" bits={}", k.bits);
            EXPECT_EQ(out.scalar_type(), k.dt) << what;
            EXPECT_TRUE(at::equal(out, expected.to(k.dt))) << what;
            if (len > 0) {
              EXPECT_LE(out.to(at::kLong).abs().max().item<int64_t>(), lim) << what;
              EXPECT_TRUE((out.to(at::kLong) * sign >= 0).all().item<bool>()) << what << ": a sign flipped";
            }
            if (len == 1003) {
              EXPECT_TRUE((total > lim).any().item<bool>()) << "the test must saturate";
            }
            expectSameOnAllRanks(c, out, what);
          }
        }
      }
    });
  }
}

// THC Alg. 2: the result is Σ_r table[codes_r], codes_r = (7i + 3r) mod 16.
TEST(CollectiveTest, TableLookupSumClosedForm) {
  at::Tensor table = at::tensor(std::vector<int64_t>{0, 3, 5, 7, 9, 11, 13, 14, 16, 17, 19, 21, 23, 25, 27, 30});
  for (int n : kWorldSizes) {
    runRanks(n, [n, &table](Communicator& c) {
      for (const auto& algo : kPointToPoint) {
        auto coll = makeAlgo(algo, c);
        for (auto wide : {at::kInt, at::kLong}) {
          auto red = tableLookupSum(table, wide);
          for (int64_t len : lengthsFor(n)) {
            auto codes = [&](int64_t rank) { return (7 * at::arange(len, at::kLong) + 3 * rank).remainder(16); };
            at::Tensor expected = at::zeros({len}, at::kLong);
            for (int q = 0; q < n; ++q) expected += table.index({codes(q)});
            at::Tensor out = coll->allReduce(codes(c.rank()).to(at::kByte), *red);
            const auto what = where(algo, wide, len, n);
            EXPECT_EQ(out.scalar_type(), wide) << what;
            EXPECT_TRUE(at::equal(out, expected.to(wide))) << what;
            expectSameOnAllRanks(c, out, what);
          }
        }
      }
    });
  }
}

}  // namespace
}  // namespace gradzip::comm
