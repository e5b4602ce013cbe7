// Tests compress/ErrorFeedback.{h,cpp} and the Factory's wrapping: the error
// feedback invariant Σ_t localApplied_t + e_T = Σ_t g_t (nothing is lost, only
// delayed) for every lossy scheme of this module on several ranks, the residual
// round-tripping through save/load, the single-worker codec's bookkeeping, the
// bias of TopK removed over steps (a bound on the residual), and
// which names the Factory wraps by default (and usesErrorFeedback agreeing), and
// which it marks as aggregating by all-gather (the controller's cost model).
#include "compress/ErrorFeedback.h"
#include "compress/Factory.h"
#include "compress/TopK.h"
#include "comm/LocalCommunicator.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/ThreadGroup.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace gradzip::compress {
namespace {

using testing::CtxHolder;

TEST(ErrorFeedback, FactoryWrapsWhereThePaperDoes) {
  for (const char* name : {"topk", "topkc", "artopk", "powersgd"}) {
    EXPECT_NE(dynamic_cast<ErrorFeedback*>(makeCompressor(name).get()), nullptr) << name;
    EXPECT_EQ(dynamic_cast<ErrorFeedback*>(makeCompressor(name, "{error_feedback: false}").get()), nullptr) << name;
    EXPECT_EQ(makeCompressor(name)->name(), name);
  }
  for (const char* name : {"fp32", "fp16", "bf16"}) {
    EXPECT_EQ(dynamic_cast<ErrorFeedback*>(makeCompressor(name).get()), nullptr) << name;
    EXPECT_NE(dynamic_cast<ErrorFeedback*>(makeCompressor(name, "{error_feedback: true}").get()), nullptr) << name;
  }
  EXPECT_THROW(makeCompressor("topkk"), ConfigError);
  EXPECT_THROW(makeCompressor("topk", "{ratoi: 0.1}"), ConfigError);  // typo in a key
  // usesErrorFeedback (the controller's ef_rate reads it) says what makeCompressor builds.
  for (const auto& name : compressorNames())
    for (const char* opts : {"{}", "{error_feedback: true}", "{error_feedback: false}"}) {
      const bool wrapped = dynamic_cast<ErrorFeedback*>(makeCompressor(name, opts).get()) != nullptr;
      EXPECT_EQ(usesErrorFeedback(name, YAML::Load(opts)), wrapped) << name << " " << opts;
    }
  EXPECT_THROW(usesErrorFeedback("topkk", YAML::Load("{}")), ConfigError);
  EXPECT_THROW(usesErrorFeedback("topk", YAML::Load("{error_feedback: maybe}")), ConfigError);
  EXPECT_THROW(makeCompressor("topkc", "{value_dtype: fp8}"), ConfigError);
}

// aggregatesByAllGather (the controller's cost model charges such a scheme the
// all-gather whatever its collective is called): TopK, whose "engine" is
// c10d's all-gather, and only schemes that cannot sum in the compressed
// domain and accept nothing but all-gathers.
TEST(Factory, AggregatesByAllGatherOnlyWhereEveryCollectiveIsAnAllGather) {
  EXPECT_TRUE(aggregatesByAllGather("topk"));
  for (const auto& name : compressorNames()) {
    if (!aggregatesByAllGather(name)) continue;
    const auto caps = makeCompressor(name)->capabilities();
    EXPECT_FALSE(caps.summable) << name;
    for (const auto& c : caps.collectives) EXPECT_TRUE(c == "allgather" || c == "engine") << name << " " << c;
  }
  for (const char* summing : {"fp16", "topkc", "thc", "powersgd"}) EXPECT_FALSE(aggregatesByAllGather(summing));
  EXPECT_THROW(aggregatesByAllGather("topkk"), ConfigError);
}

// e_t = x_t - a_t with x_t = g_t + e_{t-1} telescopes to Σ a_t + e_T = Σ g_t.
// The sums are kept in double; each step adds two float roundings (g + e and
// x - a), each <= 2^-24 |x| with |x| below ~10 here (unit Gaussians plus at most
// 20 steps of residual), so after T = 20 steps the drift is at most
// 2 * 20 * 2^-24 * 10 ≈ 2.4e-5; we allow 1e-4.
TEST(ErrorFeedback, ConservesTheSumOfGradientsOnEveryRank) {
  testing::runRanks(3, [](comm::Communicator& c) {
    for (const char* spec : {"topk|{ratio: 0.02}", "topkc|{chunk: 32, bits: 1}", "artopk|{cr: 0.02, mode: var}",
                             "powersgd|{rank: 2}", "fp16|{error_feedback: true}", "thc|{}",
                             "thc|{deployment: allreduce, rotation_block_log2: 8}"}) {
      const std::string s(spec);
      const std::string name = s.substr(0, s.find('|')), opts = s.substr(s.find('|') + 1);
      auto comp = makeCompressor(name, opts);
      auto* ef = dynamic_cast<ErrorFeedback*>(comp.get());
      ASSERT_NE(ef, nullptr) << name;
      // THC's ps form runs its own sharded parameter server; its all-reduce form a ring.
      const bool ps = opts.find("allreduce") == std::string::npos;
      CtxHolder h(c, name == "artopk" ? "ring" : name == "thc" ? (ps ? "ps" : "ring") : "engine");
      const int64_t d = 2048;
      at::Tensor sumG = at::zeros({d}, at::kDouble), sumA = at::zeros({d}, at::kDouble);
      double sumMeanErr = 0;
      for (int64_t t = 0; t < 20; ++t) {
        h.ctx.step = t;
        at::Tensor g = testing::gaussianInput(d, c.rank(), 60, t);
        auto agg = comp->aggregate(g, h.ctx);
        sumG += g.to(at::kDouble);
        sumA += agg.localApplied.to(at::kDouble);
        sumMeanErr += agg.mean.isfinite().all().item<bool>() ? 0 : 1;
      }
      at::Tensor total = sumA + ef->residual().to(at::kDouble);
      EXPECT_LT((total - sumG).abs().max().item<double>(), 1e-4) << name;
      EXPECT_EQ(sumMeanErr, 0) << name;
      EXPECT_NEAR(ef->residualNorm(), ef->residual().norm().item<double>(), 1e-9);
      if (name != "fp16") {  // lossy schemes keep something
        EXPECT_GT(ef->residualNorm(), 0.1) << name;
      }
    }
  });
}

// Beyond the telescoping identity: error feedback removes the bias of a
// biased compressor over time. TopK with fp32 values keeps the K largest of d
// coordinates, so ||x − C(x)||² <= (1 − δ)||x||², δ = K/d, for every x (it
// keeps at least the average energy share). With a constant gradient g,
// e_{t+1} = (g + e_t) − C(g + e_t) gives ||e_{t+1}|| <= q(||g|| + ||e_t||),
// q = sqrt(1 − δ), so ||e_t|| <= q/(1 − q)·||g|| for all t; and the identity
// makes the time-averaged update (1/T)Σ_t C(x_t) = g − e_T/T, within
// q/(1 − q)·||g||/T of g. Without error feedback every step applies C(g), a
// fixed bias ||g − C(g)||: for Gaussian g and δ = 0.1 about sqrt(1 − 0.44)
// = 0.75·||g|| (the top tenth of N(0, 1) holds 44% of its energy).
TEST(ErrorFeedback, RemovesTheBiasOfTopKOverSteps) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  const int64_t d = 2000, T = 400;
  TopKOptions o;
  o.ratio = 0.1;
  o.values = at::kFloat;
  ErrorFeedback ef(std::make_unique<TopK>(o));
  TopK plain(o);
  const at::Tensor g = testing::gaussianInput(d, 0, 90);
  const double gNorm = g.norm().item<double>();
  const double q = std::sqrt(1 - 0.1), bound = q / (1 - q) * gNorm;
  at::Tensor sum = at::zeros({d}, at::kDouble);
  double maxResidual = 0;
  for (int64_t t = 0; t < T; ++t) {
    ctx.step = t;
    sum += ef.aggregate(g, ctx).mean.to(at::kDouble);
    maxResidual = std::max(maxResidual, ef.residualNorm());
  }
  EXPECT_LE(maxResidual, bound * (1 + 1e-5));  // float rounding of the recursion
  const double efError = (sum / T - g.to(at::kDouble)).norm().item<double>();
  EXPECT_LE(efError, bound / T * (1 + 1e-5));
  const double plainBias = (plain.aggregate(g, ctx).mean - g).norm().item<double>();
  // The kept energy share over d = 2000 Gaussian coordinates has sd about
  // sqrt(Var(Z²; |Z| > 1.645)/d) = sqrt(2.04/2000) = 0.032, so the bias
  // sqrt(1 − share) has sd <= 0.032/(2·0.75) = 0.021: 0.1 is ~5 sd.
  EXPECT_NEAR(plainBias / gNorm, 0.75, 0.1);
  // bound/T = 0.046·||g|| (q = 0.949) against a bias >= 0.65·||g||.
  EXPECT_LT(efError, plainBias / 10);
}

TEST(ErrorFeedback, ResidualRoundTripsThroughSaveAndLoad) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  auto a = makeCompressor("topkc", "{chunk: 16, bits: 2}");
  for (int64_t t = 0; t < 3; ++t) a->aggregate(testing::gaussianInput(1000, 0, 70, t), ctx);
  auto b = makeCompressor("topkc", "{chunk: 16, bits: 2}");
  testing::checkpointRoundTrip(*a, *b);
  EXPECT_TRUE(testing::bitEqual(dynamic_cast<ErrorFeedback&>(*a).residual(),
                                dynamic_cast<ErrorFeedback&>(*b).residual()));
  at::Tensor g = testing::gaussianInput(1000, 0, 70, 3);
  EXPECT_TRUE(testing::bitEqual(a->aggregate(g, ctx).mean, b->aggregate(g, ctx).mean));
}

// encode/decode with error feedback: the residual is x - decode(encode(x)),
// matching aggregate() with one worker.
TEST(ErrorFeedback, SingleWorkerCodecKeepsTheSameResidualAsAggregate) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  ErrorFeedback viaCodec(std::make_unique<TopK>(TopKOptions{0.05}));
  ErrorFeedback viaAggregate(std::make_unique<TopK>(TopKOptions{0.05}));
  for (int64_t t = 0; t < 4; ++t) {
    at::Tensor g = testing::gaussianInput(500, 0, 80, t);
    at::Tensor decoded = viaCodec.decode(viaCodec.encode(g, ctx), 500, ctx);
    at::Tensor mean = viaAggregate.aggregate(g, ctx).mean;
    EXPECT_TRUE(testing::bitEqual(decoded, mean));
    EXPECT_TRUE(testing::bitEqual(viaCodec.residual(), viaAggregate.residual()));
  }
  EXPECT_THROW(viaCodec.encode(at::zeros({499}), ctx), UserError);  // a bucket never changes size
}

}  // namespace
}  // namespace gradzip::compress
