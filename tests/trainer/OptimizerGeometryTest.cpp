// Tests of trainer/OptimizerGeometry (the optimizer's per-coordinate update
// factor) and of measureCompression (trainer/GradSync.h), which measures the
// controller's statistics in that geometry.
#include "tests/testing/ThreadGroup.h"
#include "trainer/GradSync.h"
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
  EXPECT_FALSE(trainer::updateScale(opt, w).defined()) << "no state before the first step";
  for (int t = 1; t <= 3; ++t) {
    const auto gw = torch::tensor({1.0f, -1.0f, 1.0f, -1.0f}) * float(t) * 1e-3f;
    const auto gu = torch::tensor({-1.0f, 1.0f, 1.0f}) * float(t) * 10.0f;
    w.mutable_grad() = gw.clone();
    u.mutable_grad() = gu.clone();
    const auto w0 = w.detach().clone(), u0 = u.detach().clone();
    opt.step();
    const auto sw = trainer::updateScale(opt, w), su = trainer::updateScale(opt, u);
    ASSERT_TRUE(sw.defined() && su.defined());
    ASSERT_EQ(sw.numel(), 4);
    ASSERT_EQ(su.numel(), 3);
    EXPECT_TRUE(torch::allclose(w.detach() - w0, -lr * gw * sw, 1e-5, 1e-12)) << "step " << t;
    EXPECT_TRUE(torch::allclose(u.detach() - u0, -lr * gu * su, 1e-5, 1e-12)) << "step " << t;
    EXPECT_NEAR(sw[0].item<double>() / su[0].item<double>(), 1e4, 1.0);  // ε moves it by ~1e-5
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
  const double expected = 1 / (std::sqrt(1.03 / (1 - beta2 * beta2)) + 1e-3);
  EXPECT_NEAR(trainer::updateScale(ams, a)[0].item<double>(), expected, 1e-6);
  EXPECT_NEAR(trainer::updateScale(ams, a)[1].item<double>(), expected, 1e-6);
}

TEST(OptimizerGeometry, SgdHasOneFactorForEveryCoordinate) {
  auto w = torch::zeros({4}, torch::requires_grad());
  torch::optim::SGD opt({w}, torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-4));
  w.mutable_grad() = torch::ones({4});
  opt.step();
  EXPECT_FALSE(trainer::updateScale(opt, w).defined());
  // A tensor the optimizer does not hold has no factor either.
  torch::optim::AdamW adam({w}, torch::optim::AdamWOptions(0.1));
  adam.step();
  EXPECT_TRUE(trainer::updateScale(adam, w).defined());
  EXPECT_FALSE(trainer::updateScale(adam, torch::zeros({4})).defined());
}

TEST(MeasureCompression, TheGeometryWeighsWhatTopKDrops) {
  // x = (10, 1), top-1 keeps (10, 0): in the gradient's geometry it loses
  // 1/101 of the energy. Under Adam, whose v̂ ≈ x², the factor is ≈ 1/|x|:
  // both coordinates move alike, and the dropped one is half the update.
  const auto x = torch::tensor({10.0f, 1.0f}), c = torch::tensor({10.0f, 0.0f});
  auto s = trainer::measureCompression(x, c, {});
  EXPECT_DOUBLE_EQ(s.inputSq, 101.0);
  EXPECT_DOUBLE_EQ(s.appliedSq, 100.0);
  EXPECT_DOUBLE_EQ(s.errorSq, 1.0);
  s = trainer::measureCompression(x, c, torch::tensor({0.1f, 1.0f}));
  EXPECT_NEAR(s.errorSq / s.inputSq, 0.5, 1e-6);
  EXPECT_NEAR(s.appliedSq / s.inputSq, 0.5, 1e-6);
  // A constant factor changes no ratio; the scratch buffer form equals the other.
  auto scratch = torch::empty({2});
  const auto u = trainer::measureCompression(x, c, {}, scratch);
  const auto k = trainer::measureCompression(x, c, torch::full({2}, 3.0f));
  EXPECT_DOUBLE_EQ(u.errorSq, 1.0);
  EXPECT_NEAR(k.errorSq / k.inputSq, 1.0 / 101, 1e-7);
  EXPECT_NEAR(k.appliedSq / k.inputSq, 100.0 / 101, 1e-7);
}

TEST(MeasureCompression, GradSyncLaysTheFactorsOutLikeItsBuckets) {
  // Two parameters in one bucket, laid out in reverse registration order
  // (backward's); `b` has no factor and measures with ones. Its statistics
  // come in both geometries.
  gradzip::testing::runRanks(2, [](comm::Communicator& comm) {
    auto a = torch::zeros({3}, torch::requires_grad()), b = torch::zeros({2}, torch::requires_grad());
    trainer::Plan plan;
    trainer::GradSync sync({{"a", a}, {"b", b}}, comm, {}, plan);
    ASSERT_EQ(sync.numBuckets(), 1);
    EXPECT_FALSE(sync.statScale(0).defined());
    sync.setStatScale([&](const torch::Tensor& p) {
      return p.unsafeGetTensorImpl() == a.unsafeGetTensorImpl() ? torch::tensor({1.0f, 2.0f, 3.0f}) : torch::Tensor();
    });
    ASSERT_TRUE(sync.statScale(0).defined());
    std::vector<float> got(sync.statScale(0).data_ptr<float>(), sync.statScale(0).data_ptr<float>() + 5);
    const auto& layout = sync.bucketLayout(0);
    ASSERT_EQ(layout.size(), 2u);
    const int64_t offA = layout[0].name == "a" ? layout[0].offset : layout[1].offset;
    const int64_t offB = layout[0].name == "a" ? layout[1].offset : layout[0].offset;
    EXPECT_EQ(got[offA], 1.0f);
    EXPECT_EQ(got[offA + 2], 3.0f);
    EXPECT_EQ(got[offB], 1.0f);
    EXPECT_EQ(got[offB + 1], 1.0f);
    // One measured step: the TTA rows' statistics stay in the gradient's
    // geometry, the controller's are weighted. x = (1, 1, 1) on a and (2, 2)
    // on b (the local gradient; fp16 keeps these exactly):
    // Σx² = 3 + 8 = 11, Σ(s·x)² = 1 + 4 + 9 + 8 = 22.
    sync.setMeasureCompression(true);
    sync.beginStep(0);
    (a.sum() + 2 * b.sum()).backward();
    sync.finishStep();
    EXPECT_DOUBLE_EQ(sync.lastStats(0).inputSq, 11.0);
    EXPECT_DOUBLE_EQ(sync.lastWeightedStats(0).inputSq, 22.0);
    EXPECT_DOUBLE_EQ(sync.lastWeightedStats(0).errorSq, 0.0);
    // A factor of the wrong size names the parameter.
    try {
      sync.setStatScale([](const torch::Tensor&) { return torch::ones({7}); });
      ADD_FAILURE() << "accepted a factor of the wrong size";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("the scale of"), std::string::npos) << e.what();
    }
  });
}
