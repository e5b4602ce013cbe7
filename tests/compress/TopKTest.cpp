// Tests compress/TopK.{h,cpp}: K from ratio and bits (b = 48K/d), wire size,
// the all-gathered mean against a local reconstruction from every rank's top-K,
// losslessness at ratio 1 with fp32 values, identical results on all ranks,
// and fp16/bf16 values saturating instead of overflowing to Inf; the
// device-generic path (compress/CodecPath.h) against the SIMD selection: the
// same payload and decoded bits, ties (equal magnitudes, ±0) broken alike, and
// the same multi-rank aggregate.
#include "compress/Factory.h"
#include "compress/TopK.h"
#include "compress/kernels/TopKSelect.h"
#include "compress/kernels/TopKSelectGeneric.h"
#include "comm/LocalCommunicator.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/ThreadGroup.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <limits>

namespace gradzip::compress {
namespace {

using testing::CtxHolder;

TEST(TopK, KFromRatioAndBits) {
  TopKOptions o;
  o.ratio = 0.01;
  EXPECT_EQ(o.k(100000), 1000);
  EXPECT_EQ(o.k(10), 1);  // clamped to at least one coordinate
  o.bits = 0.48;          // b = 48K/d  =>  K = 0.48 * 1e5 / 48 = 1000
  EXPECT_EQ(o.k(100000), 1000);
  EXPECT_DOUBLE_EQ(TopK(o).bitsPerCoordinate(100000, 4), 0.48);
  o.values = at::kFloat;  // b = 64K/d
  EXPECT_EQ(o.k(100000), 750);
}

TEST(TopK, WireSizeEqualsDeclaredBitsAndKeepsTheLargest) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  auto c = makeCompressor("topk", "{ratio: 0.05, error_feedback: false}");
  for (int64_t d : {1, 20, 1000, 4097}) {
    at::Tensor x = testing::gaussianInput(d, 0, 11);
    Payload p = c->encode(x, ctx);
    EXPECT_DOUBLE_EQ(p.bytes() * 8.0 / d, c->bitsPerCoordinate(d, 1));
    at::Tensor y = c->decode(p, d, ctx);
    const int64_t k = TopKOptions{0.05}.k(d);
    EXPECT_EQ(at::count_nonzero(y).item<int64_t>(), k);
    // The kept coordinates are the k largest |x|: the smallest kept >= the largest dropped.
    at::Tensor kept = y != 0;
    if (k < d) {
      EXPECT_GE(x.abs().masked_select(kept).min().item<float>(), x.abs().masked_select(~kept).max().item<float>());
    }
    EXPECT_TRUE(testing::bitEqual(y.masked_select(kept), x.masked_select(kept).to(at::kHalf).to(at::kFloat)));
  }
}

// The mean is (1/n) Σ_r scatter(top-K of x_r in fp16), summed in rank order:
// the same float operations locally give the same bits.
TEST(TopK, MultiRankMeanEqualsLocalReconstruction) {
  for (int n : {2, 3, 4}) {
    testing::runRanks(n, [n](comm::Communicator& c) {
      CtxHolder h(c, "engine");
      TopK topk(TopKOptions{0.1});
      const int64_t d = 3000;
      auto agg = topk.aggregate(testing::gaussianInput(d, c.rank(), 21), h.ctx);
      comm::LocalCommunicator local;
      Context lctx = testing::contextFor(local);
      at::Tensor ref = at::zeros({d});
      for (int r = 0; r < n; ++r) {
        Payload p = topk.encode(testing::gaussianInput(d, r, 21), lctx);
        ref.index_add_(0, p.tensors[1].to(at::kLong), p.tensors[0].to(at::kFloat));
        if (r == c.rank()) {
          EXPECT_TRUE(testing::bitEqual(agg.localApplied, topk.decode(p, d, lctx)));
        }
      }
      EXPECT_TRUE(testing::bitEqual(agg.mean, ref.div_(n)));
      testing::expectIdenticalAcrossRanks(c, agg.mean);
    });
  }
}

TEST(TopK, RatioOneWithFp32ValuesEqualsPlainAllReduce) {
  testing::runRanks(3, [](comm::Communicator& c) {
    CtxHolder h(c, "engine");
    at::Tensor x = testing::dyadicInput(777, c.rank(), 4);  // sums exact in any order
    auto agg = makeCompressor("topk", "{ratio: 1.0, value_dtype: fp32}")->aggregate(x, h.ctx);
    at::Tensor ref = x.clone();
    c.allReduce(ref).wait();
    EXPECT_TRUE(testing::bitEqual(agg.mean, ref.div_(3)));
  });
}

// FP16 holds at most 65504: a plain cast sends ±Inf for larger values, which
// would pass the finiteness check (made on x) and poison every rank's mean.
// The wire saturates them instead; error feedback keeps the cut-off part and
// sends it next step. With x = (1e5, −70000, 1, 0, ...) and K = 2: step 1 sends
// 65504 and −65504 (residual 34496 and −4496), step 2 (zero gradient) sends
// the residual, both exact in fp16 (multiples of 32 and of 4 below 2^15 and
// 2^13), so the two steps together apply 1e5 and −70000 exactly.
TEST(TopK, Fp16ValuesSaturateInsteadOfOverflowing) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  const int64_t d = 100;
  at::Tensor x = at::zeros({d});
  x[3] = 1e5f;
  x[7] = -70000.0f;
  x[9] = 1.0f;
  TopKOptions o;
  o.ratio = 0.02;  // K = 2
  TopK plain(o);
  const at::Tensor once = plain.decode(plain.encode(x, ctx), d, ctx);
  EXPECT_TRUE(once.isfinite().all().item<bool>());
  EXPECT_EQ(once[3].item<float>(), 65504.0f);
  EXPECT_EQ(once[7].item<float>(), -65504.0f);
  EXPECT_TRUE(plain.aggregate(x, ctx).mean.isfinite().all().item<bool>());
  // bf16's largest finite value bounds its wire the same way.
  o.values = at::kBFloat16;
  TopK bf(o);
  at::Tensor huge = at::zeros({d});
  huge[0] = std::numeric_limits<float>::max();
  const at::Tensor b = bf.decode(bf.encode(huge, ctx), d, ctx);
  EXPECT_EQ(b[0].item<float>(), static_cast<float>(std::numeric_limits<c10::BFloat16>::max()));
  // Error feedback recovers the saturated part.
  auto ef = makeCompressor("topk", "{ratio: 0.02}");
  const at::Tensor first = ef->aggregate(x, ctx).mean;
  const at::Tensor applied = first + ef->aggregate(at::zeros({d}), ctx).mean;
  EXPECT_EQ(applied[3].item<float>(), 1e5f);
  EXPECT_EQ(applied[7].item<float>(), -70000.0f);
}

// Magnitudes from {0, 1, 2} with random signs, -0 included: most of the K
// largest tie, so the generic selection must break ties as the kernel does
// (the lower index first).
at::Tensor tiedInput(int64_t d, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor mag = at::randint(0, 3, {d}, gen, at::kFloat);
  at::Tensor sign = at::randint(0, 2, {d}, gen, at::kFloat).mul_(2).sub_(1);
  return mag.mul_(sign).contiguous();  // 0 * -1 = -0
}

// The ATen selection against the radix-select kernel, index for index: ties,
// ±0, ±Inf and NaN (ranked above Inf by both), every k from 0 to d.
TEST(TopK, GenericSelectionEqualsTheKernel) {
  at::Tensor x = tiedInput(97, 34);
  x[5] = std::numeric_limits<float>::infinity();
  x[50] = -std::numeric_limits<float>::infinity();
  x[70] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t k = 0; k <= x.numel(); ++k) {
    EXPECT_TRUE(at::equal(largestMagnitudesGeneric(x, k), largestMagnitudes(x, k))) << "k = " << k;
  }
  at::Tensor g = testing::gaussianInput(5000, 0, 35);
  for (int64_t k : {1, 2, 50, 2500, 4999}) EXPECT_TRUE(at::equal(largestMagnitudesGeneric(g, k), largestMagnitudes(g, k)));
}

TEST(TopK, GenericPathGivesTheSameBits) {
  for (int64_t d : {1, 2, 7, 100, 1000, 4099}) {
    for (const char* opts : {"ratio: 0.01", "ratio: 0.1\nvalue_dtype: bf16", "ratio: 0.5\nvalue_dtype: fp32",
                             "ratio: 1.0", "bits: 4.8\nerror_feedback: false"}) {
      SCOPED_TRACE(std::to_string(d) + " " + opts);
      testing::expectSameBitsOnBothPaths("topk", opts, testing::gaussianInput(d, 0, 31), 3);
      testing::expectSameBitsOnBothPaths("topk", opts, testing::dyadicInput(d, 1, 32), 2);
      testing::expectSameBitsOnBothPaths("topk", opts, tiedInput(d, 33), 2);
    }
  }
}

TEST(TopK, GenericPathAggregatesTheSameBits) {
  testing::runRanks(3, [](comm::Communicator& c) {
    CtxHolder hf(c, "engine"), hg(c, "engine");
    auto fast = makeCompressor("topk", "{ratio: 0.05, codec: auto}");
    auto generic = makeCompressor("topk", "{ratio: 0.05, codec: generic}");
    for (int step = 0; step < 3; ++step) {
      hf.ctx.step = hg.ctx.step = step;
      at::Tensor x = step == 1 ? tiedInput(2049, 40 + c.rank()) : testing::gaussianInput(2049, c.rank(), 41, step);
      const Aggregated a = fast->aggregate(x, hf.ctx), b = generic->aggregate(x, hg.ctx);
      EXPECT_TRUE(testing::bitEqual(a.mean, b.mean)) << "step " << step;
      EXPECT_TRUE(testing::bitEqual(a.localApplied, b.localApplied)) << "step " << step;
    }
  });
}

}  // namespace
}  // namespace gradzip::compress
