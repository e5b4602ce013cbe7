// Tests that THC's all-reduce form (compress/Thc.h, deployment: allreduce)
// accounts for what saturation clips: localApplied carries each rank's clip
// losses, so (1/n)·Σ_i localApplied_i equals the mean even when the sum
// saturates, on every collective; and error feedback then keeps the clipped
// part and sends it later, so Σ_t mean_t + (1/n)·Σ_i e_i = Σ_t (1/n)·Σ_i g_i.
#include "tests/compress/AggregateHarness.h"
#include "compress/Thc.h"

#include "comm/Collective.h"
#include "compress/ErrorFeedback.h"
#include "compress/ThcTable.h"
#include "compress/kernels/Hadamard.h"
#include "compress/kernels/SaturatingPackedSum.h"
#include "tests/testing/ThreadGroup.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

namespace gradzip::compress {
namespace {

at::Tensor gather(comm::Communicator& c, const at::Tensor& t) { return gradzip::testing::gatherRanks(c, t); }

// Strongly correlated workers (a shared g plus a little private noise): their
// codes have the same sign, so sums of n codes leave [−L, L] often.
at::Tensor correlatedInput(int rank, int64_t d, uint64_t seed) {
  auto shared = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto own = at::make_generator<at::CPUGeneratorImpl>(seed + 1 + rank);
  return at::randn({d}, shared) + 0.3 * at::randn({d}, own);
}

ThcOptions saturating(int aggregationBits, const std::string& range = "norm") {
  ThcOptions o;
  o.deployment = "allreduce";
  o.bits = 4;
  o.aggregationBits = aggregationBits;
  o.range = range;
  return o;
}

struct Holder {
  std::unique_ptr<comm::Collective> coll;
  Context ctx;
  Holder(comm::Communicator& c, const std::string& name) : coll(comm::makeCollective(name, c)), ctx{c} {
    ctx.collective = coll.get();
    ctx.collectiveName = name;
    ctx.seed = 21;
  }
};

// Homomorphism with saturation: S = Σ_i C_i − Σ_i Λ_i exactly (the clip losses
// Λ_i of each rank's combines), and localApplied_i = RHT⁻¹((C_i − Λ_i)·M/L),
// so (1/n)·Σ_i localApplied_i = RHT⁻¹((S/n)·M/L) = mean up to the float
// rounding of the two rotation orders (relative 1e-5, as ThcAggregateTest).
// The same codes with b = 8 (headroom: |Σ codes| <= 21 < 127) give the
// unsaturated mean; their difference is the clipped part, and each clip loses
// at least one step M/L in code units, so with a full rotation (orthonormal,
// d a power of two) ||headroom mean − mean||² >= (#coordinates that lost
// something)·(M/L)²/n² is far above the rounding tolerance. With n = 3 a
// coordinate can clip twice with opposite signs and lose nothing, so the test
// counts coordinates whose loss is non-zero from the two means themselves.
TEST(ThcSaturation, LocalAppliedCarriesTheClipLossOnEveryCollective) {
  testing::runRanks(3, [](comm::Communicator& c) {
    const int64_t d = 4096;
    const auto x = correlatedInput(c.rank(), d, 5);
    for (const char* range : {"norm", "max"})
      for (const char* name : {"ring", "tree", "ps"}) {
        SCOPED_TRACE(std::string(range) + " " + name);
        Thc sat(saturating(0, range)), wide(saturating(8, range));
        Holder hs(c, name), hw(c, name);
        hs.ctx.step = hw.ctx.step = 3;
        const Aggregated r = sat.aggregate(x, hs.ctx);
        const Aggregated full = wide.aggregate(x, hw.ctx);
        ASSERT_GT(r.saturated, d / 20);
        ASSERT_EQ(full.saturated, 0);
        const at::Tensor local = gather(c, r.localApplied).mean(0);
        const double scale = full.mean.abs().max().item<double>();
        EXPECT_LE((r.mean - local).abs().max().item<double>(), 1e-5 * scale);
        // The clipped part, in the rotated domain in code units.
        RandomizedHadamard rht(d);
        const double M = range == std::string("norm")
                             ? thcTruncation(1.0 / 32) * gather(c, x).norm(2, {1}).max().item<double>() / 64.0
                             : gather(c, rht.forward(x, hs.ctx.sharedSeed())).abs().max().item<double>();
        const at::Tensor lost = rht.forward(full.mean - r.mean, hs.ctx.sharedSeed()).to(at::kDouble) * (3 * 7 / M);
        const int64_t lossy = (lost.abs() > 0.5).sum().item<int64_t>();
        EXPECT_GT(lossy, d / 40);
        EXPECT_GE((full.mean - r.mean).to(at::kDouble).square().sum().item<double>(),
                  0.99 * lossy * (M / 7) * (M / 7) / 9);
        // Every rank's own share: localApplied differs from the headroom run's
        // (which is RHT⁻¹(C_i·M/L), the same codes) by exactly its own losses.
        const at::Tensor shares = gather(c, (full.localApplied - r.localApplied).contiguous()).sum(0);
        EXPECT_LE((shares - 3 * (full.mean - r.mean)).abs().max().item<double>(), 3e-5 * scale);
      }
  });
}

// Error feedback now recovers what saturation clipped. The decorator keeps
// e_i = x_i − localApplied_i, and (previous test) Σ_i localApplied_i = n·mean,
// so over T steps Σ_t mean_t + (1/n)·Σ_i e_{i,T} = Σ_t (1/n)·Σ_i g_{i,t}:
// nothing clipped is lost, only delayed. Tolerance: each step adds float
// roundings of x (|x| <= ~10) of about 2^−24 relative, and the rotation sums
// pair 2^12 terms (another ~12·2^−24 relative per step); 40 steps:
// 40·(2 + 12)·2^−24·10 ≈ 3e-4, and the test allows 1e-3. Without the clip
// losses in localApplied the identity would miss the clipped total Σ_t
// (headroom mean − saturated mean), which grows with every step (each step
// here clips more than d/20 coordinates by at least one step M/L), while what
// error feedback still holds back after T steps is one residual, a few steps'
// worth: the test requires it below a quarter of the 40 steps' clipped total.
TEST(ThcSaturation, ErrorFeedbackRecoversWhatSaturationClipped) {
  testing::runRanks(2, [](comm::Communicator& c) {
    const int64_t d = 4096, T = 40;
    ErrorFeedback ef(std::make_unique<Thc>(saturating(0)));
    Thc wide(saturating(8));
    Holder h(c, "ring"), hw(c, "ring");
    const at::Tensor g = correlatedInput(c.rank(), d, 9);
    const at::Tensor gMean = gather(c, g).mean(0).to(at::kDouble);
    at::Tensor sumMean = at::zeros({d}, at::kDouble), clipped = at::zeros({d}, at::kDouble);
    int64_t saturated = 0;
    for (int64_t t = 0; t < T; ++t) {
      h.ctx.step = hw.ctx.step = t;
      // The headroom run on the same error-fed input and seeds: same codes, no clip.
      const at::Tensor x = ef.residual().defined() ? g + ef.residual() : g;
      const Aggregated full = wide.aggregate(x, hw.ctx);
      const Aggregated r = ef.aggregate(g, h.ctx);
      saturated += r.saturated;
      sumMean += r.mean.to(at::kDouble);
      clipped += (full.mean - r.mean).to(at::kDouble);
    }
    EXPECT_GT(saturated, T * d / 20);  // more than d/20 clips per step on average
    const at::Tensor eMean = gather(c, ef.residual()).mean(0).to(at::kDouble);
    EXPECT_LT((sumMean + eMean - T * gMean).abs().max().item<double>(), 1e-3);
    // What is still held back is a small part of what was clipped.
    EXPECT_LT(eMean.norm().item<double>(), 0.25 * clipped.norm().item<double>());
  });
}

// The loss record itself: with n = 2 every coordinate is combined once, so
// the losses are (c_0 + c_1) − clip(c_0 + c_1) at the combining rank, and the
// two ranks' losses add up to exactly Σ codes − result on every collective.
TEST(ThcSaturation, PackedSumRecordsTheLossOfEveryClip) {
  testing::runRanks(2, [](comm::Communicator& c) {
    const int64_t n = 1001;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(77);
    const at::Tensor all = at::randint(-7, 8, {2, n}, gen, at::kInt);
    const at::Tensor mine = all[c.rank()].contiguous();
    const at::Tensor sum = all.sum(0).to(at::kInt);
    for (const char* name : {"ring", "tree", "ps"}) {
      auto coll = comm::makeCollective(name, c);
      SaturatingPackedSum sat(4, /*recordLosses=*/true);
      const at::Tensor out = coll->allReduce(SaturatingPackedSum::pack(mine, 4), sat);
      const at::Tensor losses = gather(c, sat.losses(out, n)).sum(0).to(at::kInt);
      EXPECT_TRUE(at::equal(losses, sum - sum.clamp(-7, 7))) << name;
      EXPECT_TRUE(at::equal(SaturatingPackedSum::unpack(out, 4, n), sum - losses)) << name;
    }
  });
}

}  // namespace
}  // namespace gradzip::compress
