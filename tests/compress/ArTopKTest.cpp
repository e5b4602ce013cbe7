// Tests compress/ArTopK.{h,cpp} against the flexible-communication paper's
// Alg. 1: the source rank (STAR round robin, VAR argmax of ||g_r||²), the
// aggregate equal to (1/N) Σ_r scatter(ix~, G_r[ix~]) computed locally from all
// ranks' inputs (homomorphism), the residual keeping all but ix~, exactness at
// cr = 1, wire size, and identical results through engine, ring and tree;
// the device-generic path (compress/CodecPath.h) gives the kernel path's bits,
// payload and aggregate, ties in |G| included.
#include "compress/ArTopK.h"
#include "compress/Factory.h"
#include "comm/LocalCommunicator.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/ThreadGroup.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

namespace gradzip::compress {
namespace {

using testing::CtxHolder;

TEST(ArTopK, WireSizeEqualsDeclaredBits) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  for (const char* opts : {"{cr: 0.01}", "{cr: 0.1, mode: var}", "{cr: 1.0}"}) {
    auto c = makeCompressor("artopk", std::string(opts).insert(1, "error_feedback: false, "));
    for (int64_t d : {1, 99, 5000}) {
      Payload p = c->encode(testing::gaussianInput(d, 0, 3), ctx);
      EXPECT_DOUBLE_EQ(p.bytes() * 8.0 / d, c->bitsPerCoordinate(d, 1)) << opts;
    }
  }
  ArTopKOptions o;  // k = round(0.01 * 10^5) = 1000: 1000 fp32 values + 1000 int32 indices
  EXPECT_DOUBLE_EQ(ArTopK(o).bitsPerCoordinate(100000, 4), 64.0 * 1000 / 100000);
}

TEST(ArTopK, VarPicksTheLargestEnergyLowestRankOnTies) {
  EXPECT_EQ(ArTopK::pickSource({1.f, 5.f, 2.f}), 1);
  EXPECT_EQ(ArTopK::pickSource({3.f, 1.f, 3.f}), 0);
  EXPECT_EQ(ArTopK::pickSource({0.f}), 0);
}

// Rank r's G has scale (1 + r), so VAR-TopK's source (largest top-k energy) is
// the last rank; STAR's is step % N.
TEST(ArTopK, AggregatesOnTheSourceRanksIndices) {
  for (int n : {2, 3}) {
    testing::runRanks(n, [n](comm::Communicator& c) {
      const int64_t d = 2000;
      auto input = [&](int r, int64_t step) { return testing::gaussianInput(d, r, 13, step).mul(1 + r); };
      for (const char* coll : {"engine", "ring", "tree"}) {
        for (const std::string mode : {"star", "var"}) {
          CtxHolder h(c, coll);
          ArTopKOptions o;
          o.cr = 0.05;
          o.mode = mode;
          ArTopK ar(o);
          for (int64_t step = 0; step < 2; ++step) {
            h.ctx.step = step;
            auto agg = ar.aggregate(input(c.rank(), step), h.ctx);
            const int src = mode == "star" ? static_cast<int>(step % n) : n - 1;
            at::Tensor ix = std::get<1>(at::topk(input(src, step).abs(), o.k(d), 0, true, false));
            at::Tensor sum = at::zeros({ix.numel()});
            for (int r = 0; r < n; ++r) sum += input(r, step).index_select(0, ix);
            at::Tensor expected = at::zeros({d}).index_put_({ix}, sum.div(n));
            // n = 2: one float add per coordinate, any order: exact. n = 3: both the
            // collective's and this local sum make two adds, each rounding by <= 2^-24
            // of at most Σ|G_r|, and the / n rounds both by 2^-24 relative:
            // |mean - expected| <= (2 + 2 + 2) * 2^-24 * Σ_r |G_r| / n.
            at::Tensor absSum = at::zeros({d});
            for (int r = 0; r < n; ++r) absSum += input(r, step).abs();
            EXPECT_TRUE(((agg.mean - expected).abs() <= absSum * (6.0 / 16777216 / n)).all().item<bool>())
                << coll << " " << mode;
            if (n == 2) {
              EXPECT_TRUE(testing::bitEqual(agg.mean, expected)) << coll << " " << mode;
            }
            // Alg. 1 line 18: the residual G - localApplied keeps all but ix~.
            at::Tensor g = input(c.rank(), step);
            EXPECT_TRUE(testing::bitEqual(agg.localApplied, at::zeros({d}).index_put_({ix}, g.index_select(0, ix))));
            testing::expectIdenticalAcrossRanks(c, agg.mean);
          }
        }
      }
    });
  }
}

TEST(ArTopK, FullRatioEqualsPlainAllReduce) {
  testing::runRanks(3, [](comm::Communicator& c) {
    for (const char* coll : {"engine", "ring", "tree"}) {
      CtxHolder h(c, coll);
      at::Tensor x = testing::dyadicInput(513, c.rank(), 14);
      auto agg = makeCompressor("artopk", "{cr: 1.0, error_feedback: false}")->aggregate(x, h.ctx);
      at::Tensor ref = x.clone();
      c.allReduce(ref).wait();
      EXPECT_TRUE(testing::bitEqual(agg.mean, ref.div_(3))) << coll;
    }
  });
}

// Magnitudes from {0, 1, 2} with random signs (-0 included): most selections tie.
at::Tensor tiedInput(int64_t d, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor mag = at::randint(0, 3, {d}, gen, at::kFloat);
  return mag.mul_(at::randint(0, 2, {d}, gen, at::kFloat).mul_(2).sub_(1)).contiguous();
}

TEST(ArTopK, GenericPathGivesTheSameBits) {
  for (int64_t d : {1, 3, 64, 1000, 4099}) {
    for (const char* opts : {"cr: 0.01", "cr: 0.2\nmode: var", "cr: 1.0\nerror_feedback: false"}) {
      SCOPED_TRACE(std::to_string(d) + " " + opts);
      testing::expectSameBitsOnBothPaths("artopk", opts, testing::gaussianInput(d, 0, 51), 3);
      testing::expectSameBitsOnBothPaths("artopk", opts, tiedInput(d, 52), 2);
    }
  }
}

TEST(ArTopK, GenericPathAggregatesTheSameBits) {
  testing::runRanks(3, [](comm::Communicator& c) {
    for (const char* mode : {"star", "var"}) {
      CtxHolder hf(c, "ring"), hg(c, "ring");
      auto fast = makeCompressor("artopk", std::string("{cr: 0.05, codec: auto, mode: ") + mode + "}");
      auto generic = makeCompressor("artopk", std::string("{cr: 0.05, codec: generic, mode: ") + mode + "}");
      for (int step = 0; step < 3; ++step) {
        hf.ctx.step = hg.ctx.step = step;
        at::Tensor x = step == 1 ? tiedInput(1025, 60 + c.rank()) : testing::gaussianInput(1025, c.rank(), 61, step);
        const Aggregated a = fast->aggregate(x, hf.ctx), b = generic->aggregate(x, hg.ctx);
        EXPECT_TRUE(testing::bitEqual(a.mean, b.mean)) << mode << " step " << step;
        EXPECT_TRUE(testing::bitEqual(a.localApplied, b.localApplied)) << mode << " step " << step;
      }
    }
  });
}

}  // namespace
}  // namespace gradzip::compress
