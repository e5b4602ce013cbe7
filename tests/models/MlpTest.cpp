// Tests of models/Mlp.{h,cpp}: parameter count, shapes, input check, gradients.
#include "models/Mlp.h"

#include "models/Registry.h"
#include "tests/models/ModelTesting.h"
#include "util/Error.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace gradzip::models {
namespace {

ModelOptions mlp(int64_t inputSize, std::vector<int64_t> hidden, int64_t classes) {
  ModelOptions o;
  o.name = "mlp";
  o.numClasses = classes;
  o.mlp.inputSize = inputSize;
  o.mlp.hidden = std::move(hidden);
  return o;
}

TEST(MlpTest, ParameterCount) {
  // widths 784 -> 128 -> 64 -> 10: 784·128+128 + 128·64+64 + 64·10+10 = 100,480 + 8,256 + 650.
  EXPECT_EQ(parameterCount(*makeModel(mlp(784, {128, 64}, 10))), 109'386);
  // No hidden layer: multinomial logistic regression, 3072·5 + 5.
  EXPECT_EQ(parameterCount(*makeModel(mlp(3072, {}, 5))), 15'365);
}

TEST(MlpTest, OutputShapes) {
  auto a = makeModel(mlp(28 * 28, {16}, 7));
  EXPECT_EQ(a->forward(torch::randn({2, 1, 28, 28})).sizes(), (std::vector<int64_t>{2, 7}));
  auto b = makeModel(mlp(3 * 32 * 32, {16}, 7));
  EXPECT_EQ(b->forward(torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 7}));
}

TEST(MlpTest, RejectsWrongFeatureCount) {
  auto m = makeModel(mlp(784, {16}, 10));
  EXPECT_THROW(m->forward(torch::randn({2, 3, 32, 32})), UserError);
  EXPECT_THROW(m->forwardMasked(torch::randn({2, 784}), torch::ones({2, 784})), UserError);
}

TEST(MlpTest, EveryParameterGetsAGradient) {
  torch::manual_seed(11);
  auto m = makeModel(mlp(784, {32, 16}, 10));
  testing::expectEveryParameterGetsGradient(*m, testing::classificationLoss(m->forward(torch::randn({8, 1, 28, 28}))));
}

}  // namespace
}  // namespace gradzip::models
