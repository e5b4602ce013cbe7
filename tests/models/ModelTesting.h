// Helpers shared by the models/ tests: option builders and the "every parameter
// receives a gradient" check (an unused parameter would stall GradSync's bucket
// readiness and waste bandwidth, so every model must touch all of them).
#pragma once

#include "models/Model.h"
#include "models/ModelOptions.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

namespace gradzip::models::testing {

// Runs the model tests on one intra-op thread. Measured on the shared 2-core
// machine under load: the whole suite took 94 s wall (30 s CPU) with 2 OpenMP
// threads, which spin while waiting for each other, and 7 s wall (2 s CPU) with
// 1. The numbers the tests check do not depend on the thread count.
class SingleThreaded : public ::testing::Environment {
 public:
  void SetUp() override { at::set_num_threads(1); }
};
// An inline variable: registered once however many test files include this header.
inline ::testing::Environment* const kSingleThreaded = ::testing::AddGlobalTestEnvironment(new SingleThreaded);

inline ModelOptions imageOptions(const std::string& name, int64_t inChannels, int64_t numClasses) {
  ModelOptions o;
  o.name = name;
  o.inChannels = inChannels;
  o.numClasses = numClasses;
  return o;
}

// Backpropagates `loss` and expects a defined, finite gradient that is not
// identically zero for every named parameter of `model`.
inline void expectEveryParameterGetsGradient(Model& model, const at::Tensor& loss) {
  model.zero_grad();
  loss.backward();
  for (const auto& p : model.named_parameters()) {
    const at::Tensor& g = p.value().grad();
    ASSERT_TRUE(g.defined()) << p.key() << " received no gradient";
    EXPECT_TRUE(at::isfinite(g).all().item<bool>()) << p.key();
    EXPECT_GT(g.abs().sum().item<double>(), 0.0) << p.key() << " has an all-zero gradient";
  }
}

// Cross-entropy of classification logits against fixed pseudo-random labels.
inline at::Tensor classificationLoss(const at::Tensor& logits) {
  auto labels = torch::randint(logits.size(1), {logits.size(0)}, torch::kLong);
  return torch::nn::functional::cross_entropy(logits, labels);
}

}  // namespace gradzip::models::testing
