// Tests of sync/GradSync on real Gloo groups: the core data-parallel
// identity (one step on 2 ranks equals one single-process step on the union
// batch), bucketing with overlap over several collectives, unused parameters,
// the cross-rank NaN agreement, and compressor-state checkpoints.
#include "models/Registry.h"
#include "tests/testing/ThreadGroup.h"
#include "sync/GradSync.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>
#include <torch/torch.h>

#include <chrono>
#include <limits>

using namespace gradzip;
using gradzip::testing::runRanks;

namespace {

models::ModelOptions mlpOptions() {
  models::ModelOptions o;
  o.name = "mlp";
  o.numClasses = 10;
  o.mlp.inputSize = 20;
  o.mlp.hidden = {32, 16};
  return o;
}

std::vector<std::pair<std::string, torch::Tensor>> named(torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& kv : m.named_parameters()) out.emplace_back(kv.key(), kv.value());
  return out;
}

// A fixed batch of 8 examples; rank r of n takes rows [r*8/n, (r+1)*8/n).
std::pair<torch::Tensor, torch::Tensor> batch() {
  auto g = at::make_generator<at::CPUGeneratorImpl>(7);
  auto x = torch::randn({8, 20}, g);
  auto y = torch::randint(0, 10, {8}, g);
  return {x, y};
}

trainer::Plan plan(const std::string& compressor, const std::string& collective) {
  trainer::Plan p;
  p.compressor = compressor;
  p.collective = collective;
  return p;
}

// Gradients of the mean loss over the whole batch, computed in one process.
std::vector<torch::Tensor> referenceGrads() {
  torch::manual_seed(3);
  auto model = models::makeModel(mlpOptions());
  auto [x, y] = batch();
  torch::nn::functional::cross_entropy(model->forward(x), y).backward();
  std::vector<torch::Tensor> g;
  for (auto& p : model->parameters()) g.push_back(p.grad().clone());
  return g;
}

}  // namespace

TEST(GradSync, TwoRanksEqualOneProcessOnTheUnionBatch) {
  const auto ref = referenceGrads();
  for (const auto& coll : {"engine", "ring", "tree", "ps"}) {
    // Small buckets force several buckets, communicated while backward runs.
    runRanks(2, [&](comm::Communicator& c) {
      std::shared_ptr<models::Model> model;
      {
        static std::mutex mu;  // torch::manual_seed is process-global
        std::lock_guard<std::mutex> lock(mu);
        torch::manual_seed(3);
        model = models::makeModel(mlpOptions());
      }
      trainer::GradSyncOptions o;
      o.bucketBytes = 1024;
      trainer::GradSync sync(named(*model), c, o, plan("fp32", coll));
      ASSERT_GT(sync.numBuckets(), 2);
      auto [x, y] = batch();
      auto mine = torch::arange(c.rank() * 4, c.rank() * 4 + 4);
      sync.beginStep(0);
      torch::nn::functional::cross_entropy(model->forward(x.index({mine})), y.index({mine})).backward();
      sync.finishStep();
      auto params = model->parameters();
      ASSERT_EQ(params.size(), ref.size());
      // The mean of two half-batch means is the union mean; only the order of
      // float additions differs, so agreement is to a few ulps of the values.
      for (size_t i = 0; i < params.size(); ++i)
        EXPECT_TRUE(torch::allclose(params[i].grad(), ref[i], 1e-5, 1e-6)) << coll << " param " << i;
    });
  }
}

TEST(GradSync, UnusedParameterContributesZeroAndDoesNotHang) {
  runRanks(2, [](comm::Communicator& c) {
    auto used = torch::ones({4}, torch::requires_grad());
    auto unused = torch::ones({3}, torch::requires_grad());
    trainer::GradSync sync({{"used", used}, {"unused", unused}}, c, {}, plan("fp32", "engine"));
    sync.beginStep(0);
    (used * float(c.rank() + 1)).sum().backward();
    sync.finishStep();
    EXPECT_TRUE(torch::allclose(used.grad(), torch::full({4}, 1.5f)));
    EXPECT_TRUE(torch::equal(unused.grad(), torch::zeros({3})));
  });
}

// AR-TopK runs on the fused whole-model gradient (flexible-communication paper
// Alg. 1): a static AR-TopK plan gets one bucket whatever the cap, `fused:
// false` and runs under the controller keep the cap, other plans too. On two
// ranks the fused plan keeps the k = cr·d largest coordinates of the whole
// gradient (STAR: rank 0's indices at step 0), not k per parameter: with cr
// 0.25 over a (6 + 2)-coordinate model whose large entries all sit in `a`, the
// two kept coordinates are both in `a` and `b` is all zeros, where per-bucket
// AR-TopK would keep one coordinate of `b` too.
TEST(GradSync, AStaticArTopKPlanRunsOnTheFusedWholeModelGradient) {
  auto artopk = [](const char* options) {
    trainer::Plan p = plan("artopk", "ring");
    p.options = YAML::Load(options);
    return p;
  };
  const int64_t cap = 16;  // bytes: one parameter a bucket
  EXPECT_EQ(trainer::bucketBytesFor(artopk("{cr: 0.25}"), cap, false), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(trainer::bucketBytesFor(artopk("{cr: 0.25, fused: false}"), cap, false), cap);
  EXPECT_EQ(trainer::bucketBytesFor(artopk("{cr: 0.25}"), cap, true), cap);
  EXPECT_EQ(trainer::bucketBytesFor(plan("topk", "allgather"), cap, false), cap);
  runRanks(2, [&](comm::Communicator& c) {
    auto a = torch::zeros({6}, torch::requires_grad());
    auto b = torch::zeros({2}, torch::requires_grad());
    trainer::GradSyncOptions o;
    o.bucketBytes = trainer::bucketBytesFor(artopk("{cr: 0.25, error_feedback: false}"), cap, false);
    trainer::GradSync sync({{"a", a}, {"b", b}}, c, o, artopk("{cr: 0.25, error_feedback: false}"));
    ASSERT_EQ(sync.numBuckets(), 1);
    sync.beginStep(0);
    const auto wa = torch::tensor({10.f, -9.f, 1.f, 2.f, 3.f, 4.f}), wb = torch::tensor({5.f, 6.f});
    ((a * wa).sum() + (b * wb).sum()).backward();
    sync.finishStep();
    // Both ranks had the same gradient: the mean keeps a[0], a[1] (the two largest of 8).
    EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({10.f, -9.f, 0.f, 0.f, 0.f, 0.f}))) << a.grad();
    EXPECT_TRUE(torch::equal(b.grad(), torch::zeros({2}))) << b.grad();
  });
}

TEST(GradSync, RecordsEachBucketsHandoverAndCommThreadSeconds) {
  // One bucket per parameter: `used`'s gradient is handed over by its hook
  // during backward, `unused`'s (bucket 0, reverse registration order) only
  // by finishStep. Every send is held back 20 ms, so the comm thread spends
  // at least that on each bucket of the ring.
  runRanks(2, [](comm::Communicator& c) {
    using Clock = std::chrono::steady_clock;
    auto secs = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    auto used = torch::ones({4}, torch::requires_grad());
    auto unused = torch::ones({3}, torch::requires_grad());
    trainer::GradSyncOptions o;
    o.bucketBytes = 16;
    trainer::GradSync sync({{"used", used}, {"unused", unused}}, c, o, plan("fp32", "ring"));
    ASSERT_EQ(sync.numBuckets(), 2);
    c.setSendDelay(std::chrono::milliseconds(20));
    const auto before = Clock::now();
    sync.beginStep(0);
    const auto begun = Clock::now();
    (used * float(c.rank() + 1)).sum().backward();
    const auto backwardEnd = Clock::now();
    sync.finishStep();
    const auto& handedInHook = sync.lastBreakdown(1);
    const auto& handedAtFinish = sync.lastBreakdown(0);
    EXPECT_GT(handedInHook.handover, 0.0);
    EXPECT_LE(handedInHook.handover, secs(before, backwardEnd));
    EXPECT_GE(handedAtFinish.handover, secs(begun, backwardEnd));
    EXPECT_GE(sync.lastBackwardEnd(), secs(begun, backwardEnd));
    EXPECT_LE(handedInHook.handover, sync.lastBackwardEnd());
    EXPECT_LE(sync.lastBackwardEnd(), handedAtFinish.handover);
    for (int k = 0; k < 2; ++k) {
      const auto& bd = sync.lastBreakdown(k);
      EXPECT_GE(bd.busy, 0.020) << "bucket " << k;
      EXPECT_GE(bd.busy, bd.encode + bd.communicate + bd.decode) << "bucket " << k;
    }
  });
}

TEST(GradSync, NonFiniteGradientOnOneRankStopsEveryRankAtTheSameStep) {
  std::atomic<int> thrown{0};
  runRanks(2, [&](comm::Communicator& c) {
    auto w = torch::ones({5}, torch::requires_grad());
    trainer::GradSync sync({{"w", w}}, c, {}, plan("fp32", "engine"));
    for (int step = 0; step < 3; ++step) {
      sync.beginStep(step);
      const float scale = (step == 1 && c.rank() == 1) ? NAN : 1.0f;
      (w * scale).sum().backward();
      try {
        sync.finishStep();
        EXPECT_NE(step, 1);
      } catch (const trainer::NonFiniteGradient& e) {
        EXPECT_EQ(e.step, 1);
        const std::string msg = e.what();
        if (c.rank() == 1) {
          EXPECT_NE(msg.find("rank 1: w"), std::string::npos) << msg;
        }
        ++thrown;
      }
      w.mutable_grad().zero_();
    }
  });
  EXPECT_EQ(thrown.load(), 2);
}

TEST(GradSync, PlanSwitchKeepsBitIdenticalGradientsAcrossRanks) {
  runRanks(3, [](comm::Communicator& c) {
    auto w = torch::zeros({1000}, torch::requires_grad());
    trainer::GradSync sync({{"w", w}}, c, {}, plan("fp16", "engine"));
    for (int step = 0; step < 4; ++step) {
      if (step == 2) sync.setPlan(plan("fp32", "ring"));
      sync.beginStep(step);
      auto g = at::make_generator<at::CPUGeneratorImpl>(100 * step + c.rank());
      (w * torch::randn({1000}, g)).sum().backward();
      sync.finishStep();
      std::vector<at::Tensor> all;
      for (int r = 0; r < c.size(); ++r) all.push_back(torch::empty({1000}));
      c.allGather(all, w.grad().contiguous()).wait();
      for (int r = 1; r < c.size(); ++r) EXPECT_TRUE(torch::equal(all[r], all[0])) << "step " << step;
      w.mutable_grad().zero_();
    }
  });
}

TEST(GradSync, ResidualNormReportsErrorFeedbackState) {
  // fp32 keeps no residual. TopK with error feedback keeps, after the first
  // step, e = x − (x on the top-K coordinates): 0 < ||e|| <= ||x||, x being
  // this rank's own gradient (one-process computation on the same rows).
  auto [x, y] = batch();
  for (const std::string name : {"fp32", "topk"}) {
    runRanks(2, [&](comm::Communicator& c) {
      std::shared_ptr<models::Model> model, twin;
      {
        static std::mutex mu;  // torch::manual_seed is process-global
        std::lock_guard<std::mutex> lock(mu);
        torch::manual_seed(3);
        model = models::makeModel(mlpOptions());
        torch::manual_seed(3);
        twin = models::makeModel(mlpOptions());
      }
      auto mine = torch::arange(c.rank() * 4, c.rank() * 4 + 4);
      torch::nn::functional::cross_entropy(twin->forward(x.index({mine})), y.index({mine})).backward();
      double localSq = 0;
      for (auto& p : twin->parameters()) localSq += p.grad().pow(2).sum().item<double>();

      trainer::GradSyncOptions o;
      o.bucketBytes = 1024;
      trainer::GradSync sync(named(*model), c, o, plan(name, name == "topk" ? "allgather" : "engine"));
      EXPECT_EQ(sync.residualNorm(), 0.0);
      sync.beginStep(0);
      torch::nn::functional::cross_entropy(model->forward(x.index({mine})), y.index({mine})).backward();
      sync.finishStep();
      if (name == "fp32") {
        EXPECT_EQ(sync.residualNorm(), 0.0);
      } else {
        EXPECT_GT(sync.residualNorm(), 0.0);
        EXPECT_LE(sync.residualNorm(), std::sqrt(localSq) * (1 + 1e-6));
      }
    });
  }
}

TEST(GradSync, ErrorFeedbackResidualFollowsThePlanSwitches) {
  // Both ranks feed the same gradients, so every aggregate equals the rank's
  // own applied vector, and error feedback's invariant (compress/ErrorFeedback.h)
  // reads Σ w.grad + e = Σ g. It must hold across the plan switches:
  // TopK 10% -> TopK 1% (the residual moves over) -> fp16 (no residual: it
  // joins the first fp16 step's gradient). Parking the 10% plan's residual
  // with that plan would leave Σ g − Σ w.grad short by it.
  runRanks(2, [](comm::Communicator& c) {
    auto w = torch::zeros({1000}, torch::requires_grad());
    auto topk = [](double ratio) {
      auto p = plan("topk", "allgather");
      p.options["ratio"] = ratio;
      return p;
    };
    trainer::GradSync sync({{"w", w}}, c, {}, topk(0.1));
    auto sumG = torch::zeros({1000}), applied = torch::zeros({1000});
    for (int step = 0; step < 9; ++step) {
      if (step == 3) sync.setPlan(topk(0.01));
      if (step == 6) sync.setPlan(plan("fp16", "engine"));
      sync.beginStep(step);
      auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
      const auto g = torch::randn({1000}, gen);
      (w * g).sum().backward();
      sync.finishStep();
      sumG += g;
      applied += w.grad();
      w.mutable_grad().zero_();
      if (step == 5) {
        ASSERT_GT(sync.residualNorm(), 0.1 * sumG.norm().item<double>());
        EXPECT_NEAR((sumG - applied).norm().item<double>(), sync.residualNorm(), 1e-4 * sumG.norm().item<double>());
      }
    }
    EXPECT_EQ(sync.residualNorm(), 0.0);
    // fp16 rounds each applied value by at most 2⁻¹¹ of itself.
    EXPECT_LT((sumG - applied).norm().item<double>(), 2e-3 * sumG.norm().item<double>());
  });
}
