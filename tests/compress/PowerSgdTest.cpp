// Tests compress/PowerSgd.{h,cpp} (Vogels et al. 2019, Alg. 1): exact recovery
// of a rank-r mean gradient, warm start converging to the best rank-r
// approximation, the layout plan (uncompressed 1-D tensors, conv reshape,
// same-shape batching) and its exact wire size, Q surviving save/load, the
// single-worker codec equal to aggregate() at n = 1, identical results on
// every rank through engine, ring and tree, and the device-generic path
// (compress/CodecPath.h) giving the same bits step after step, the warm-started
// Q included, also across a checkpoint written on one path and read on the other.
#include "compress/Factory.h"
#include "compress/PowerSgd.h"
#include "comm/LocalCommunicator.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/ThreadGroup.h"

#include <gtest/gtest.h>

#include <sstream>

namespace gradzip::compress {
namespace {

using testing::CtxHolder;

at::Tensor randn(std::vector<int64_t> shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen, at::kFloat);
}

// Each rank holds M_r = A_r Bᵀ with a shared B (rank 4), so the mean M̄ has rank 4.
// With r = 4, P = M̄ Q spans col(M̄), P̂ P̂ᵀ is its projector and P̂ Qᵀ = P̂ P̂ᵀ M̄ = M̄
// after the first step already; float rounding leaves ~1e-6 relative error
// (the test allows 1e-4).
TEST(PowerSgd, RecoversARankRMeanExactly) {
  testing::runRanks(3, [](comm::Communicator& c) {
    for (const char* coll : {"engine", "ring", "tree"}) {
      CtxHolder h(c, coll);
      h.ctx.layout = {{"w", {40, 30}, 0, 1200}};
      PowerSgdOptions o;
      o.rank = 4;
      PowerSgd p(o);
      const at::Tensor b = randn({30, 4}, 1);
      at::Tensor mean = at::zeros({40, 30});
      for (int r = 0; r < 3; ++r) mean += at::mm(randn({40, 4}, 10 + r), b.t());
      mean.div_(3);
      for (int step = 0; step < 3; ++step) {
        h.ctx.step = step;
        auto agg = p.aggregate(at::mm(randn({40, 4}, 10 + c.rank()), b.t()).view({-1}), h.ctx);
        EXPECT_LT(testing::vnmse(mean.view({-1}), agg.mean), 1e-8) << coll << " step " << step;
        EXPECT_TRUE(testing::bitEqual(agg.localApplied, agg.mean));  // error feedback keeps M - P̂Qᵀ
        testing::expectIdenticalAcrossRanks(c, agg.mean);
      }
    }
  });
}

// Warm start is one power-iteration step per call: with singular values
// 10, 9, 8, 7 then <= 0.5, the subspace error shrinks by (0.5/7)² per step, so
// after 8 steps P̂ Qᵀ is the best rank-4 approximation up to a 1e-9-relative
// excess; a cold start (fresh random Q each step) stays well above it.
TEST(PowerSgd, WarmStartConvergesToTheBestRankRApproximation) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  ctx.layout = {{"w", {64, 48}, 0, 64 * 48}};
  auto u = std::get<0>(at::linalg_qr(randn({64, 48}, 2)));
  auto v = std::get<0>(at::linalg_qr(randn({48, 48}, 3)));
  at::Tensor s = at::cat({at::tensor({10.f, 9.f, 8.f, 7.f}), at::linspace(0.5, 0.01, 44)});
  at::Tensor m = at::mm(u * s, v.t()).contiguous().view({-1});
  const double best = s.narrow(0, 4, 44).square().sum().item<double>() / s.square().sum().item<double>();
  PowerSgdOptions o;
  PowerSgd warm(o);
  o.warmStart = false;
  PowerSgd cold(o);
  double eWarm = 0, eCold = 0;
  for (int step = 0; step < 8; ++step) {
    ctx.step = step;
    eWarm = testing::vnmse(m, warm.aggregate(m, ctx).mean);
    eCold = testing::vnmse(m, cold.aggregate(m, ctx).mean);
  }
  EXPECT_NEAR(eWarm, best, 1e-3 * best);
  EXPECT_GT(eCold, 1.5 * best);
}

// A bucket [conv 8x3x3x3 | bias 8 | two 16x20 matrices | 2x2 matrix]: the bias
// and the 2x2 matrix (r(R+C) = 16 >= 4) go uncompressed; the conv becomes
// [8, 27]; the two 16x20 matrices share one batch. Bits: 32 (8 + 4 + 4(8+27)
// + 2 * 4(16+20)) / d.
TEST(PowerSgd, LayoutPlanWireSizeAndExactUncompressedTensors) {
  const int64_t d = 216 + 8 + 2 * 320 + 4;
  std::vector<TensorSlot> layout = {{"conv", {8, 3, 3, 3}, 0, 216},
                                    {"bias", {8}, 216, 8},
                                    {"a", {16, 20}, 224, 320},
                                    {"b", {16, 20}, 544, 320},
                                    {"tiny", {2, 2}, 864, 4}};
  testing::runRanks(2, [&](comm::Communicator& c) {
    CtxHolder h(c, "engine");
    h.ctx.layout = layout;
    PowerSgd p;
    at::Tensor x = testing::gaussianInput(d, c.rank(), 31);
    auto agg = p.aggregate(x, h.ctx);
    const double bits = 32.0 * (8 + 4 + 4 * (8 + 27) + 2 * 4 * (16 + 20)) / d;
    EXPECT_DOUBLE_EQ(p.bitsPerCoordinate(d, 2), bits);
    at::Tensor exact = testing::gaussianInput(d, 0, 31) + testing::gaussianInput(d, 1, 31);
    exact.div_(2);
    for (auto [o, n] : {std::pair<int64_t, int64_t>{216, 8}, {864, 4}}) {
      EXPECT_TRUE(testing::bitEqual(agg.mean.narrow(0, o, n), exact.narrow(0, o, n)));
      EXPECT_TRUE(testing::bitEqual(agg.localApplied.narrow(0, o, n), x.narrow(0, o, n)));
    }
    comm::LocalCommunicator local;
    Context lctx = testing::contextFor(local);
    lctx.layout = layout;
    PowerSgd single;
    EXPECT_DOUBLE_EQ(single.encode(x, lctx).bytes() * 8.0 / d, bits);
  });
}

// decode(encode(x)) is what aggregate() returns with one worker, step by step
// (encode advances the warm-start Q like aggregate does).
TEST(PowerSgd, SingleWorkerCodecEqualsAggregate) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  PowerSgd a, b;
  for (int step = 0; step < 3; ++step) {
    ctx.step = step;
    at::Tensor x = testing::gaussianInput(4096, 0, 40, step);
    at::Tensor viaAggregate = a.aggregate(x, ctx).mean;  // flat bucket: one 64x64 matrix
    Payload p = b.encode(x, ctx);
    EXPECT_DOUBLE_EQ(p.bytes() * 8.0 / 4096, b.bitsPerCoordinate(4096, 1));
    EXPECT_DOUBLE_EQ(b.bitsPerCoordinate(4096, 1), 32.0 * 4 * (64 + 64) / 4096);
    EXPECT_TRUE(testing::bitEqual(b.decode(p, 4096, ctx), viaAggregate));
  }
}

TEST(PowerSgd, QStateRoundTripsThroughSaveAndLoad) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  ctx.layout = {{"a", {32, 24}, 0, 768}, {"b", {32, 24}, 768, 768}, {"c", {10}, 1536, 10}};
  PowerSgd original;
  for (int step = 0; step < 3; ++step) {
    ctx.step = step;
    original.aggregate(testing::gaussianInput(1546, 0, 50, step), ctx);
  }
  PowerSgd restored;
  testing::checkpointRoundTrip(original, restored);
  // A different seed would give a different fresh Q: equality proves Q was restored.
  Context other = ctx;
  other.seed = 999;
  ctx.step = other.step = 3;
  at::Tensor x = testing::gaussianInput(1546, 0, 50, 3);
  EXPECT_TRUE(testing::bitEqual(original.aggregate(x, ctx).mean, restored.aggregate(x, other).mean));
}

TEST(PowerSgd, GenericPathGivesTheSameBits) {
  for (int64_t d : {1, 7, 100, 1546, 4096, 10007}) {
    for (const char* opts : {"rank: 1", "rank: 4", "rank: 2\nwarm_start: false\nerror_feedback: false"}) {
      SCOPED_TRACE(std::to_string(d) + " " + opts);
      testing::expectSameBitsOnBothPaths("powersgd", opts, testing::gaussianInput(d, 0, 61), 3);
    }
  }
}

// With a layout (two same-shape matrices batched, a conv, a 1-D tensor), on
// three ranks: the mean and localApplied of every step agree bit for bit; a
// checkpoint of the generic instance restores into a fast one (and back) with
// the same continuation.
TEST(PowerSgd, GenericPathAggregatesTheSameBitsAndCheckpointsAcross) {
  testing::runRanks(3, [](comm::Communicator& c) {
    CtxHolder hf(c, "ring"), hg(c, "ring");
    const std::vector<TensorSlot> layout = {
        {"a", {32, 24}, 0, 768}, {"b", {32, 24}, 768, 768}, {"conv", {8, 4, 3, 3}, 1536, 288}, {"bias", {10}, 1824, 10}};
    hf.ctx.layout = hg.ctx.layout = layout;
    auto fast = makeCompressor("powersgd", "{rank: 3, codec: auto}");
    auto generic = makeCompressor("powersgd", "{rank: 3, codec: generic}");
    auto check = [&](Compressor& f, Compressor& g, int step) {
      hf.ctx.step = hg.ctx.step = step;
      at::Tensor x = testing::gaussianInput(1834, c.rank(), 62, step);
      const Aggregated a = f.aggregate(x, hf.ctx), b = g.aggregate(x, hg.ctx);
      EXPECT_TRUE(testing::bitEqual(a.mean, b.mean)) << "step " << step;
      EXPECT_TRUE(testing::bitEqual(a.localApplied, b.localApplied)) << "step " << step;
    };
    for (int step = 0; step < 3; ++step) check(*fast, *generic, step);
    auto fastRestored = makeCompressor("powersgd", "{rank: 3, codec: auto}");
    auto genericRestored = makeCompressor("powersgd", "{rank: 3, codec: generic}");
    testing::checkpointRoundTrip(*generic, *fastRestored);
    testing::checkpointRoundTrip(*fast, *genericRestored);
    for (int step = 3; step < 5; ++step) check(*fastRestored, *genericRestored, step);
  });
}

}  // namespace
}  // namespace gradzip::compress
