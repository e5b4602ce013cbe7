// Tests compress/FloatCast.{h,cpp}: fp32/fp16/bf16 all-reduce baselines. Wire
// size, bit-exact fp32 against a plain all-reduce, fp16 aggregation equal to the
// sum of the ranks' half-precision contributions (homomorphism), bounds for
// bf16, identical results on every rank, through engine, ring and tree, and
// the device-generic path (compress/CodecPath.h) giving the SIMD casts' bits:
// payload, decode and multi-rank aggregate, on arbitrary finite bit patterns
// (rounding ties, subnormals, values beyond the half range).
#include "compress/Factory.h"
#include "compress/FloatCast.h"
#include "comm/LocalCommunicator.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/ThreadGroup.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace gradzip::compress {
namespace {

using testing::CtxHolder;

TEST(FloatCast, WireSizeEqualsDeclaredBits) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  for (auto [name, bits] : {std::pair{"fp32", 32.0}, {"fp16", 16.0}, {"bf16", 16.0}}) {
    auto c = makeCompressor(name);
    for (int64_t d : {1, 7, 1000}) {
      at::Tensor x = testing::gaussianInput(d, 0, 1);
      Payload p = c->encode(x, ctx);
      EXPECT_EQ(c->bitsPerCoordinate(d, 1), bits) << name;
      EXPECT_EQ(p.bytes() * 8, static_cast<int64_t>(bits) * d) << name;
      // decode(encode(x)) is the cast round trip: exact for fp32, the cast for halves.
      at::Tensor y = c->decode(p, d, ctx);
      EXPECT_TRUE(testing::bitEqual(y, name == std::string("fp32") ? x : x.to(p.tensors[0].scalar_type()).to(at::kFloat)));
    }
  }
}

TEST(FloatCast, Fp32EqualsPlainAllReduceBitForBit) {
  for (int n : {2, 3}) {
    testing::runRanks(n, [](comm::Communicator& c) {
      for (const char* coll : {"engine", "ring", "tree"}) {
        CtxHolder h(c, coll);
        at::Tensor x = testing::gaussianInput(1001, c.rank(), 5);
        auto agg = FloatCast(at::kFloat).aggregate(x, h.ctx);
        // The reference: the same collective's plain float sum, then / n.
        at::Tensor ref = x.clone();
        if (h.collective) ref = h.collective->allReduce(x, *comm::floatSum());
        else c.allReduce(ref).wait();
        ref.div_(c.size());
        EXPECT_TRUE(testing::bitEqual(agg.mean, ref)) << coll;
        EXPECT_TRUE(testing::bitEqual(agg.localApplied, x));
        testing::expectIdenticalAcrossRanks(c, agg.mean);
      }
    });
  }
}

// Homomorphism: aggregating in fp16 equals summing the ranks' fp16 payloads
// half(x_r / n) locally. With 2 ranks there is exactly one half-precision add
// per coordinate, the same rounding everywhere, so the match is bit for bit.
// With 4 ranks the summation order is the collective's: each of the 3 adds
// rounds with relative error <= 2^-11, so |error| <= 3 * 2^-11 * Σ_r |h_r|.
TEST(FloatCast, Fp16AggregatesInTheCompressedDomain) {
  for (int n : {2, 4}) {
    testing::runRanks(n, [n](comm::Communicator& c) {
      for (const char* coll : {"engine", "ring", "tree"}) {
        CtxHolder h(c, coll);
        const int64_t d = 4099;
        auto agg = FloatCast(at::kHalf).aggregate(testing::gaussianInput(d, c.rank(), 9), h.ctx);
        at::Tensor sum = at::zeros({d}), absSum = at::zeros({d});
        for (int r = 0; r < n; ++r) {
          at::Tensor hr = testing::gaussianInput(d, r, 9).div(n).to(at::kHalf).to(at::kFloat);
          sum += hr;
          absSum += hr.abs();
        }
        if (n == 2) {
          EXPECT_TRUE(testing::bitEqual(agg.mean, sum.to(at::kHalf).to(at::kFloat))) << coll;
        } else {
          EXPECT_TRUE(((agg.mean - sum).abs() <= absSum * (3.0 / 2048) + 1e-7).all().item<bool>()) << coll;
        }
        // localApplied is this rank's own decoded contribution times n.
        at::Tensor mine = testing::gaussianInput(d, c.rank(), 9).div(n).to(at::kHalf).to(at::kFloat).mul(n);
        EXPECT_TRUE(testing::bitEqual(agg.localApplied, mine));
        testing::expectIdenticalAcrossRanks(c, agg.mean);
      }
    });
  }
}

// Dividing by n before the cast keeps sums of values near the fp16 maximum finite.
TEST(FloatCast, Fp16DoesNotOverflowNearTheHalfMaximum) {
  testing::runRanks(3, [](comm::Communicator& c) {
    CtxHolder h(c, "engine");
    at::Tensor x = at::full({16}, 60000.0f);
    auto agg = FloatCast(at::kHalf).aggregate(x, h.ctx);
    EXPECT_TRUE(at::isfinite(agg.mean).all().item<bool>());
    // 60000/3 = 20000 is exact in fp16 (a multiple of 16 below 2^15); the sum is 60000.
    EXPECT_TRUE(at::equal(agg.mean, x));
  });
}

// bf16 keeps 8 significant bits (unit roundoff 2^-8): each contribution has
// relative error <= 2^-8 and each of the n-1 adds another 2^-8 of a partial sum
// bounded by Σ|h_r|, so |mean - exact| <= n * 2^-8 * Σ_r |x_r| / n (first order;
// 1% slack covers the second-order terms).
TEST(FloatCast, Bf16MeanWithinRoundingBound) {
  testing::runRanks(3, [](comm::Communicator& c) {
    CtxHolder h(c, "ring");
    const int64_t d = 2000;
    auto agg = FloatCast(at::kBFloat16).aggregate(testing::gaussianInput(d, c.rank(), 3), h.ctx);
    at::Tensor exact = at::zeros({d}), absSum = at::zeros({d});
    for (int r = 0; r < 3; ++r) {
      exact += testing::gaussianInput(d, r, 3);
      absSum += testing::gaussianInput(d, r, 3).abs();
    }
    exact.div_(3);
    EXPECT_TRUE(((agg.mean - exact).abs() <= absSum * (3.0 / 3 / 256) * 1.01).all().item<bool>());
    testing::expectIdenticalAcrossRanks(c, agg.mean);
  });
}

// Every finite float bit pattern is equally likely: all binades, subnormals,
// ±0, and values beyond the fp16 range (they round to ±Inf on the wire).
at::Tensor anyFiniteBits(int64_t d, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor bits = at::randint(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), {d}, gen,
                                at::kInt);
  at::Tensor x = bits.view(at::kFloat);
  return at::where(x.isfinite(), x, at::zeros_like(x)).contiguous();
}

// Floats whose fp16 / bf16 roundings are exact ties: halfway between two
// neighbours, so round-to-nearest-even decides.
at::Tensor roundingTies(int64_t d, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor m = at::randint(-2048, 2048, {d}, gen, at::kFloat);
  return m.add_(0.5).mul_(std::ldexp(1.0, -10)).contiguous();  // k + 1/2 ulps at fp16's 11 bits
}

TEST(FloatCast, GenericPathGivesTheSameBits) {
  for (const char* name : {"fp32", "fp16", "bf16"}) {
    for (int64_t d : {1, 7, 31, 33, 1000, 4099}) {
      SCOPED_TRACE(std::string(name) + " " + std::to_string(d));
      testing::expectSameBitsOnBothPaths(name, "error_feedback: false", testing::gaussianInput(d, 0, 91), 2);
      testing::expectSameBitsOnBothPaths(name, "error_feedback: false", anyFiniteBits(d, 92), 1);
      testing::expectSameBitsOnBothPaths(name, "error_feedback: false", roundingTies(d, 93), 1);
      testing::expectSameBitsOnBothPaths(name, "error_feedback: false", testing::gaussianInput(d, 0, 94).mul(1e-6), 1);
    }
  }
}

// n = 3: the wire is x / 3 (the division the kernels fuse into the cast), the
// mean the widened sum, localApplied the widened wire times 3.
TEST(FloatCast, GenericPathAggregatesTheSameBits) {
  testing::runRanks(3, [](comm::Communicator& c) {
    for (const char* name : {"fp32", "fp16", "bf16"}) {
      for (const char* coll : {"engine", "ring"}) {
        CtxHolder hf(c, coll), hg(c, coll);
        auto fast = makeCompressor(name, "{error_feedback: false, codec: auto}");
        auto generic = makeCompressor(name, "{error_feedback: false, codec: generic}");
        for (int step = 0; step < 2; ++step) {
          at::Tensor x = step == 0 ? testing::gaussianInput(1031, c.rank(), 95) : roundingTies(1031, 96 + c.rank());
          const Aggregated a = fast->aggregate(x, hf.ctx), b = generic->aggregate(x, hg.ctx);
          EXPECT_TRUE(testing::bitEqual(a.mean, b.mean)) << name << " " << coll << " step " << step;
          EXPECT_TRUE(testing::bitEqual(a.localApplied, b.localApplied)) << name << " " << coll << " step " << step;
        }
      }
    }
  });
}

}  // namespace
}  // namespace gradzip::compress
