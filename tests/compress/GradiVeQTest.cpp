// Tests compress/GradiVeQ: the co-located flattening, exact linearity of the
// compressed vector, UᵀU = I, projection error on the samples <= λ, the
// schedule (warm-up, sampling, compressed), identical bases on every rank, the
// aggregate equal to decompress(mean of compressed vectors) computed locally,
// checkpoints that reproduce the run, and the device-generic path
// (compress/CodecPath.h) giving the same bits through warm-up, sampling, the
// basis and compressed steps, also across a checkpoint taken on the other path.
#include "compress/GradiVeQ.h"

#include "comm/LocalCommunicator.h"
#include "compress/Factory.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <torch/serialize.h>
#include <gtest/gtest.h>

namespace gradzip::compress {
namespace {

using testing::CtxHolder;

// A bucket with one conv weight [F=8, D=4, 3, 3] (288 values, K = 3·8·4 = 96,
// 3 slices), a bias [8] and a second conv [4, 8, 1, 1] (32 values, K = 32).
std::vector<TensorSlot> layout() {
  return {{"conv1.weight", {8, 4, 3, 3}, 0, 288}, {"conv1.bias", {8}, 288, 8}, {"conv2.weight", {4, 8, 1, 1}, 296, 32}};
}
constexpr int64_t kD = 328;

// Gradients with the structure GradiVeQ exploits: in the co-located flattening
// every K-slice of a layer is a random combination of the same few directions
// (spatial correlation, §3), plus small noise; the bias is unstructured.
at::Tensor gradient(int rank, int64_t step) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(1000 * step + rank);
  auto dirs1 = at::randn({4, 96}, at::make_generator<at::CPUGeneratorImpl>(77));
  auto dirs2 = at::randn({3, 32}, at::make_generator<at::CPUGeneratorImpl>(78));
  // Permuted order is [kh, kw, D, F]; permute({3,2,0,1}) returns to [F, D, kh, kw].
  auto p1 = (at::matmul(at::randn({3, 4}, g), dirs1) + 0.01 * at::randn({3, 96}, g)).reshape({3, 3, 4, 8});
  auto p2 = (at::matmul(at::randn({1, 3}, g), dirs2) + 0.01 * at::randn({1, 32}, g)).reshape({1, 1, 8, 4});
  return at::cat({p1.permute({3, 2, 0, 1}).reshape({-1}), at::randn({8}, g), p2.permute({3, 2, 0, 1}).reshape({-1})})
      .contiguous();
}

GradiVeQOptions smallSchedule() {
  GradiVeQOptions o;
  o.warmup = 2;
  o.samples = 20;
  o.compressed = 5;
  o.sampleLevels = 0;  // uncompressed samples: the tests below need exact ones
  return o;
}

TEST(GradiVeQ, FlatteningPutsFiltersTogether) {
  // permute {2,3,1,0}: position k = ((h·kw + w)·D + c)·F + f holds G[f][c][h][w].
  auto G = at::arange(8 * 4 * 3 * 3, at::kFloat).view({8, 4, 3, 3});
  auto P = G.permute({2, 3, 1, 0}).reshape({-1});
  EXPECT_EQ(P[0].item<float>(), G[0][0][0][0].item<float>());
  EXPECT_EQ(P[1].item<float>(), G[1][0][0][0].item<float>());  // next filter, same place
  EXPECT_EQ(P[8].item<float>(), G[0][1][0][0].item<float>());  // then depth
  EXPECT_EQ(P[32].item<float>(), G[0][0][0][1].item<float>()); // then width
}

TEST(GradiVeQ, ScheduleBasesAndLinearity) {
  comm::LocalCommunicator local;
  GradiVeQ q(smallSchedule());
  Context ctx{local};
  ctx.layout = layout();
  for (int64_t t = 0; t < 22; ++t) {
    EXPECT_EQ(q.phase(), t < 2 ? GradiVeQ::Phase::Warmup : GradiVeQ::Phase::Sample) << t;
    auto x = gradient(0, t);
    auto r = q.aggregate(x, ctx);
    EXPECT_TRUE(at::equal(r.mean, x));  // one rank, uncompressed
  }
  ASSERT_EQ(q.phase(), GradiVeQ::Phase::Compressed);
  ASSERT_EQ(q.numLayers(), 2);
  EXPECT_EQ(q.sliceSize(0), 96);
  EXPECT_EQ(q.sliceSize(1), 32);
  for (int l = 0; l < 2; ++l) {
    const auto& U = q.basis(l);
    // Orthonormal columns (float SVD output): |UᵀU − I| <= 1e-5.
    auto I = at::eye(U.size(1));
    EXPECT_LE((at::matmul(U.t(), U) - I).abs().max().item<float>(), 1e-5);
    // 4 directions + noise: d is small, ratio K/d large.
    EXPECT_LE(U.size(1), 8);
    // Projection error on the (centred) samples <= λ (eq. (6)).
    auto S = q.samples(l).to(at::kDouble);
    auto C = S - S.mean(0, true);
    auto Ud = U.to(at::kDouble);
    auto resid = C - at::matmul(at::matmul(C, Ud), Ud.t());
    const double loss = resid.pow(2).sum().item<double>() / C.pow(2).sum().item<double>();
    EXPECT_LE(loss, 0.01 + 1e-6);
  }
  // Linearity (eq. (4)): c(x) = Uᵀ(x − μ) is affine, so c(a + b) + c(0) = c(a) + c(b).
  auto a = gradient(3, 100), b = gradient(4, 100), z = at::zeros({kD});
  auto lhs = q.compressVector(a + b) + q.compressVector(z);
  auto rhs = q.compressVector(a) + q.compressVector(b);
  EXPECT_LE((lhs - rhs).abs().max().item<float>(), 1e-4);
  // Compressed wire: far fewer values than coordinates; the bias and the
  // non-slice remainder travel uncompressed.
  EXPECT_LT(q.compressVector(a).numel(), kD / 4);
  EXPECT_DOUBLE_EQ(q.bitsPerCoordinate(kD, 1), 32.0 * q.compressVector(a).numel() / kD);
  // Round trip on the structured gradient is close (captures ≥ 99% energy of the samples).
  auto back = q.decompressVector(q.compressVector(a));
  EXPECT_LE((back - a).pow(2).sum().item<double>(), 0.05 * a.pow(2).sum().item<double>());
  // The bias coordinates are exact.
  EXPECT_TRUE(at::equal(back.narrow(0, 288, 8), a.narrow(0, 288, 8)));
}

TEST(GradiVeQ, MultiRankIdenticalBasesAndLinearAggregate) {
  testing::runRanks(3, [](comm::Communicator& c) {
    GradiVeQ q(smallSchedule());
    auto ring = comm::makeCollective("ring", c);
    Context ctx{c};
    ctx.layout = layout();
    ctx.collective = ring.get();
    ctx.collectiveName = "ring";
    for (int64_t t = 0; t < 22; ++t) q.aggregate(gradient(c.rank(), t), ctx);
    ASSERT_EQ(q.phase(), GradiVeQ::Phase::Compressed);
    for (int l = 0; l < q.numLayers(); ++l) {
      std::vector<at::Tensor> all(c.size());
      for (auto& u : all) u = at::empty_like(q.basis(l));
      c.allGather(all, q.basis(l)).wait();
      for (int i = 1; i < c.size(); ++i) EXPECT_TRUE(at::equal(all[i], all[0])) << "layer " << l;
    }
    auto x = gradient(c.rank(), 50);
    auto r = q.aggregate(x, ctx);
    // The compressed-domain aggregate equals decompressing the average of the
    // ranks' compressed vectors, computed here from every rank's input.
    std::vector<at::Tensor> xs(c.size());
    for (auto& v : xs) v = at::empty_like(x);
    c.allGather(xs, x).wait();
    auto cs = at::zeros_like(q.compressVector(x));
    for (const auto& v : xs) cs += q.compressVector(v);
    auto expect = q.decompressVector(cs / c.size());
    EXPECT_LE((r.mean - expect).abs().max().item<float>(), 1e-5);
    EXPECT_TRUE(at::allclose(r.localApplied, q.decompressVector(q.compressVector(x)), 1e-5, 1e-6));
  });
}

TEST(GradiVeQ, SamplingWithQsgdAndCheckpoint) {
  comm::LocalCommunicator local;
  GradiVeQOptions o = smallSchedule();
  o.sampleLevels = 7;  // 4-bit QSGD samples, as the paper
  GradiVeQ q(o);
  Context ctx{local};
  ctx.layout = layout();
  for (int64_t t = 0; t < 2; ++t) q.aggregate(gradient(0, t), ctx);
  EXPECT_DOUBLE_EQ(q.bitsPerCoordinate(kD, 1), 4.0 + 32.0 / kD);  // QSGD s = 7 during sampling
  for (int64_t t = 2; t < 23; ++t) {
    ctx.step = t;
    q.aggregate(gradient(0, t), ctx);
  }
  ASSERT_EQ(q.phase(), GradiVeQ::Phase::Compressed);
  // Save mid-cycle, restore into a fresh instance, and both continue identically.
  testing::TempDir dir;
  const std::string path = dir.path() + "/gq.pt";
  {
    torch::serialize::OutputArchive ar;
    q.save(ar);
    ar.save_to(path);
  }
  GradiVeQ restored(o);
  {
    torch::serialize::InputArchive ar;
    ar.load_from(path);
    restored.load(ar);
  }
  EXPECT_EQ(restored.iteration(), q.iteration());
  for (int64_t t = 23; t < 40; ++t) {  // through the next sampling window and basis
    ctx.step = t;
    auto x = gradient(0, t);
    auto a = q.aggregate(x, ctx), b = restored.aggregate(x, ctx);
    ASSERT_TRUE(at::equal(a.mean, b.mean)) << t;
  }
  for (int l = 0; l < q.numLayers(); ++l) EXPECT_TRUE(at::equal(q.basis(l), restored.basis(l)));
}

// Sampling iterations aggregate 4-bit QSGD in the paper's ring all-reduce
// (decompress-add-recompress, §4 "4-bit-QSGD RAR"): on 4 ranks each rank sends
// 2(n − 1) segment messages, about 2(n−1)/n of one message, where the
// all-gather would send n − 1 whole messages; every rank records the same
// samples and so computes the same basis.
TEST(GradiVeQ, SamplingUsesTheRingOfThePaper) {
  testing::runRanks(4, [](comm::Communicator& c) {
    GradiVeQOptions o = smallSchedule();
    o.sampleLevels = 7;
    GradiVeQ q(o);
    EXPECT_EQ(o.sampleCollective, "ring");
    Context ctx{c};
    ctx.layout = layout();
    for (int64_t t = 0; t < 2; ++t) q.aggregate(gradient(c.rank(), t), ctx);  // warm-up
    ASSERT_EQ(q.phase(), GradiVeQ::Phase::Sample);
    PhaseTimes times;
    ctx.times = &times;
    ctx.step = 2;
    auto r = q.aggregate(gradient(c.rank(), 2), ctx);
    testing::expectIdenticalAcrossRanks(c, r.mean);
    const double oneMessage = 4 + (kD * 4 + 7) / 8;  // QSGD s = 7 of all kD coordinates: header + 4 bits each
    EXPECT_LT(times.bytesSent, 2 * oneMessage);     // ring: ~1.5 messages; all-gather: 3
    EXPECT_GT(times.bytesSent, oneMessage);
    ctx.times = nullptr;
    for (int64_t t = 3; t < 22; ++t) {
      ctx.step = t;
      q.aggregate(gradient(c.rank(), t), ctx);
    }
    ASSERT_EQ(q.phase(), GradiVeQ::Phase::Compressed);
    for (int l = 0; l < q.numLayers(); ++l) testing::expectIdenticalAcrossRanks(c, q.samples(l));
  });
}

// §4 "Slice size K": K is a multiple of F·D, where the first-slice basis
// fits the other slices (Fig. 5: the loss drops only at multiples of F·D).
// max_slice (1024) caps the multiple: [32, 16] takes 3·F·D = 1536 down to
// 1024 = 2·F·D; [64, 32] (F·D = 2048 > the cap) takes F·D itself, not the
// cap (1024: half of one kernel position's F·D values); a 1x1 conv's layer
// is one F·D slice, so K = F·D, here also above the cap.
TEST(GradiVeQ, SliceSizeIsAMultipleOfFTimesDWhateverTheCap) {
  comm::LocalCommunicator local;
  Context ctx{local};
  ctx.layout = {{"a.weight", {32, 16, 3, 3}, 0, 4608},
                {"b.weight", {64, 32, 3, 3}, 4608, 18432},
                {"c.weight", {48, 48, 1, 1}, 23040, 2304},
                {"d.weight", {8, 4, 3, 3}, 25344, 288}};
  GradiVeQ q(GradiVeQOptions{});  // max_slice 1024, slice_multiple 3
  q.aggregate(at::zeros({25632}), ctx);
  ASSERT_EQ(q.numLayers(), 4);
  const std::vector<int64_t> expected = {1024, 2048, 2304, 96};
  for (int l = 0; l < 4; ++l) {
    const int64_t fd = ctx.layout[l].shape[0] * ctx.layout[l].shape[1];
    EXPECT_EQ(q.sliceSize(l) % fd, 0) << ctx.layout[l].name << ": K = " << q.sliceSize(l) << ", F·D = " << fd;
    EXPECT_EQ(q.sliceSize(l), expected[l]) << ctx.layout[l].name;
  }
}

TEST(GradiVeQ, BadInputAndFactory) {
  comm::LocalCommunicator local;
  GradiVeQ q(smallSchedule());
  Context ctx{local};
  EXPECT_THROW(q.aggregate(at::tensor({NAN}), ctx), UserError);
  EXPECT_THROW(q.aggregate(at::ones({4}, at::kDouble), ctx), UserError);
  ctx.layout = {{"w", {2, 2, 1, 1}, 2, 4}};  // exceeds a bucket of 3
  EXPECT_THROW(q.aggregate(at::ones({3}), ctx), UserError);
  auto c = makeCompressor("gradiveq", "{lambda: 0.02, warmup: 10, samples: 50, compressed: 200}");
  EXPECT_TRUE(c->capabilities().summable);
  EXPECT_THROW(makeCompressor("gradiveq", "{lambda: 2}"), ConfigError);
}

// Same bits on both paths (uncompressed samples: the QSGD sampling has its own
// paths and tests). A short schedule reaches every phase: warm-up, sampling,
// the basis, compressed steps and the next sampling window.
TEST(GradiVeQ, GenericPathGivesTheSameBits) {
  const std::string opts = "warmup: 1\nsamples: 3\ncompressed: 2\nsample_levels: 0";
  for (int64_t d : {int64_t{1}, int64_t{7}, kD}) testing::expectSameBitsOnBothPaths("gradiveq", opts, testing::gaussianInput(d, 0, 71), 3);
  testing::runRanks(3, [](comm::Communicator& c) {
    CtxHolder hf(c, "ring"), hg(c, "ring");
    hf.ctx.layout = hg.ctx.layout = layout();
    const std::string yaml = "{warmup: 1, samples: 3, compressed: 2, sample_levels: 0, codec: ";
    auto fast = makeCompressor("gradiveq", yaml + "auto}");
    auto generic = makeCompressor("gradiveq", yaml + "generic}");
    auto check = [&](Compressor& f, Compressor& g, int64_t step) {
      hf.ctx.step = hg.ctx.step = step;
      at::Tensor x = gradient(c.rank(), step);
      const Aggregated a = f.aggregate(x, hf.ctx), b = g.aggregate(x, hg.ctx);
      EXPECT_TRUE(testing::bitEqual(a.mean, b.mean)) << "step " << step;
      EXPECT_TRUE(testing::bitEqual(a.localApplied, b.localApplied)) << "step " << step;
    };
    for (int64_t step = 0; step < 6; ++step) check(*fast, *generic, step);
    auto fastRestored = makeCompressor("gradiveq", yaml + "auto}");
    auto genericRestored = makeCompressor("gradiveq", yaml + "generic}");
    testing::checkpointRoundTrip(*generic, *fastRestored);
    testing::checkpointRoundTrip(*fast, *genericRestored);
    for (int64_t step = 6; step < 12; ++step) check(*fastRestored, *genericRestored, step);
  });
}

}  // namespace
}  // namespace gradzip::compress
