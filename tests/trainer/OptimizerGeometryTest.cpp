// Tests of trainer/OptimizerGeometry (the optimizer's per-tensor update
// factor) and of measureCompression (sync/CompressionStats.h), which measures the
// controller's statistics in that geometry and the TTA rows' in the
// gradient's, in one pass.
#include "tests/testing/ThreadGroup.h"
#include "sync/GradSync.h"
#include "trainer/OptimizerGeometry.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

using namespace gradzip;

TEST(OptimizerGeometry, AdamWFactorTurnsTheGradientIntoItsUpdate) {
  // With β₁ = 0 and no weight decay AdamW's update is −lr·g/(√v̂ + ε)
  // (Loshchilov & Hutter 2019, Alg. 2). Where every coordinate of a tensor has
  // gradients of one magnitude, v̂ is the same for all of them and the
  // per-tensor factor must reproduce the step taken, coordinate by
  // coordinate. Two tensors 10⁴ apart in gradient size get factors 10⁴ apart.
  auto w = torch::zeros({4}, torch::requires_grad()), u = torch::zeros({3}, torch::requires_grad());
  const double lr = 0.1, beta2 = 0.9, eps = 1e-8;
  torch::optim::AdamW opt({w, u}, torch::optim::AdamWOptions(lr).betas({0.0, beta2}).eps(eps).weight_decay(0));
  EXPECT_FALSE(trainer::updateScale(opt, w)) << "no state before the first step";
  for (int t = 1; t <= 3; ++t) {
    const auto gw = torch::tensor({1.0f, -1.0f, 1.0f, -1.0f}) * float(t) * 1e-3f;
    const auto gu = torch::tensor({-1.0f, 1.0f, 1.0f}) * float(t) * 10.0f;
    w.mutable_grad() = gw.clone();
    u.mutable_grad() = gu.clone();
    const auto w0 = w.detach().clone(), u0 = u.detach().clone();
    opt.step();
    const auto sw = trainer::updateScale(opt, w), su = trainer::updateScale(opt, u);
    ASSERT_TRUE(sw && su);
    EXPECT_TRUE(torch::allclose(w.detach() - w0, -lr * gw * *sw, 1e-5, 1e-12)) << "step " << t;
    EXPECT_TRUE(torch::allclose(u.detach() - u0, -lr * gu * *su, 1e-5, 1e-12)) << "step " << t;
    EXPECT_NEAR(*sw / *su, 1e4, 1.0);  // ε moves it by ~1e-5
  }
  // Mixed magnitudes: the closed form on the tensor's mean second moment, v
  // from max_exp_avg_sq under amsgrad. Gradients (4, 2), then (1, 1):
  // v₁ = 0.1·(16, 4) = (1.6, 0.4), v₂ = 0.9·v₁ + 0.1·(1, 1) = (1.54, 0.46),
  // max = (1.6, 0.46), mean 1.03, bias correction 1 − 0.9².
  auto a = torch::zeros({2}, torch::requires_grad());
  torch::optim::AdamW ams({a}, torch::optim::AdamWOptions(lr).betas({0.0, beta2}).eps(1e-3).amsgrad(true));
  for (const auto& g : {torch::tensor({4.0f, 2.0f}), torch::tensor({1.0f, 1.0f})}) {
    a.mutable_grad() = g;
    ams.step();
  }
  const auto s = trainer::updateScale(ams, a);
  ASSERT_TRUE(s);
  EXPECT_NEAR(*s, 1 / (std::sqrt(1.03 / (1 - beta2 * beta2)) + 1e-3), 1e-6);
}

TEST(OptimizerGeometry, SgdHasOneFactorForEveryCoordinate) {
  auto w = torch::zeros({4}, torch::requires_grad());
  torch::optim::SGD opt({w}, torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-4));
  w.mutable_grad() = torch::ones({4});
  opt.step();
  EXPECT_FALSE(trainer::updateScale(opt, w));
  // A tensor the optimizer does not hold has no factor either.
  torch::optim::AdamW adam({w}, torch::optim::AdamWOptions(0.1));
  adam.step();
  EXPECT_TRUE(trainer::updateScale(adam, w));
  EXPECT_FALSE(trainer::updateScale(adam, torch::zeros({4})));
}

TEST(MeasureCompression, TheGeometryWeighsWhatTopKDrops) {
  // Two one-coordinate tensors, x = (10, 1); top-1 keeps (10, 0): in the
  // gradient's geometry it loses 1/101 of the energy. Under Adam, whose
  // v̂ ≈ x², the factors are ≈ 1/|x| (weights s² = 0.01, 1): both tensors move
  // alike, and the dropped one is half the update.
  const auto x = torch::tensor({10.0f, 1.0f}), c = torch::tensor({10.0f, 0.0f});
  const std::vector<compress::TensorSlot> layout = {{"p", {1}, 0, 1}, {"q", {1}, 1, 1}};
  auto m = trainer::measureCompression(x, c, layout, {});
  EXPECT_DOUBLE_EQ(m.plain.inputSq, 101.0);
  EXPECT_DOUBLE_EQ(m.plain.appliedSq, 100.0);
  EXPECT_DOUBLE_EQ(m.plain.errorSq, 1.0);
  EXPECT_DOUBLE_EQ(m.weighted.errorSq, 1.0);  // no weights: the same
  m = trainer::measureCompression(x, c, layout, {0.01, 1.0});
  EXPECT_DOUBLE_EQ(m.plain.errorSq / m.plain.inputSq, 1.0 / 101);  // both geometries in one pass
  EXPECT_NEAR(m.weighted.errorSq / m.weighted.inputSq, 0.5, 1e-6);
  EXPECT_NEAR(m.weighted.appliedSq / m.weighted.inputSq, 0.5, 1e-6);
  // A constant weight changes no ratio; the scratch buffer form equals the other.
  auto scratch = torch::empty({2});
  const auto u = trainer::measureCompression(x, c, layout, {}, scratch);
  const auto k = trainer::measureCompression(x, c, layout, {9.0, 9.0});
  EXPECT_DOUBLE_EQ(u.plain.errorSq, 1.0);
  EXPECT_NEAR(k.weighted.errorSq / k.weighted.inputSq, 1.0 / 101, 1e-7);
  EXPECT_NEAR(k.weighted.appliedSq / k.weighted.inputSq, 100.0 / 101, 1e-7);
}

TEST(MeasureCompression, GradSyncWeighsEachTensorOfItsBuckets) {
  // Two parameters in one bucket, laid out in reverse registration order
  // (backward's); `b` has no factor and weighs 1. One measured step gives
  // both geometries.
  gradzip::testing::runRanks(2, [](comm::Communicator& comm) {
    auto a = torch::zeros({3}, torch::requires_grad()), b = torch::zeros({2}, torch::requires_grad());
    trainer::Plan plan;
    trainer::GradSync sync({{"a", a}, {"b", b}}, comm, {}, plan);
    ASSERT_EQ(sync.numBuckets(), 1);
    EXPECT_TRUE(sync.statWeights(0).empty());
    sync.setStatScale([&](const torch::Tensor& p) {
      return p.unsafeGetTensorImpl() == a.unsafeGetTensorImpl() ? std::optional<double>(2.0) : std::nullopt;
    });
    const auto& layout = sync.bucketLayout(0);
    ASSERT_EQ(layout.size(), 2u);
    ASSERT_EQ(sync.statWeights(0).size(), 2u);
    EXPECT_EQ(sync.statWeights(0)[layout[0].name == "a" ? 0 : 1], 4.0);
    EXPECT_EQ(sync.statWeights(0)[layout[0].name == "a" ? 1 : 0], 1.0);
    // x = (1, 1, 1) on a and (2, 2) on b (the local gradient; fp16 keeps these
    // exactly): the TTA rows' Σx² = 3 + 8 = 11, the controller's
    // Σ s²x² = 4·3 + 8 = 20.
    sync.setMeasureCompression(true);
    sync.beginStep(0);
    (a.sum() + 2 * b.sum()).backward();
    sync.finishStep();
    EXPECT_DOUBLE_EQ(sync.lastStats(0).inputSq, 11.0);
    EXPECT_DOUBLE_EQ(sync.lastWeightedStats(0).inputSq, 20.0);
    EXPECT_DOUBLE_EQ(sync.lastWeightedStats(0).errorSq, 0.0);
    // No tensor with a factor: back to the gradient's geometry.
    sync.setStatScale([](const torch::Tensor&) { return std::optional<double>(); });
    EXPECT_TRUE(sync.statWeights(0).empty());
  });
}
