// Tests of models/Vgg.{h,cpp}: hand-computed parameter counts of the BN/CIFAR-head
// variants, torchvision names, output shapes on 28x28 and 32x32, and gradients.
#include "models/Vgg.h"

#include "models/Registry.h"
#include "tests/models/ModelTesting.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace gradzip::models {
namespace {

using testing::imageOptions;

TEST(VggTest, Vgg11ParameterCountByHand) {
  // VGG-11 (configuration A) with BN, 3 input channels, 10 classes. Each conv is
  // 3x3 with bias: 9·in·out + out; each BN adds 2·out.
  //   conv 3->64      1,728 +  64 =     1,792   BN   128
  //   conv 64->128   73,728 + 128 =    73,856   BN   256
  //   conv 128->256 294,912 + 256 =   295,168   BN   512
  //   conv 256->256 589,824 + 256 =   590,080   BN   512
  //   conv 256->512 1,179,648 + 512 = 1,180,160 BN 1,024
  //   3 x conv 512->512 3 x (2,359,296 + 512) = 7,079,424   BN 3 x 1,024
  //   convs 9,220,480 + BNs 5,504 + classifier 512·10 + 10 = 5,130  => 9,231,114
  EXPECT_EQ(parameterCount(*makeModel(imageOptions("vgg11", 3, 10))), 9'231'114);
  // 1 input channel: the first conv loses 2·64·9 = 1,152; 7 classes: the head
  // loses 3·513 = 1,539. 9,231,114 - 1,152 - 1,539 = 9,228,423.
  EXPECT_EQ(parameterCount(*makeModel(imageOptions("vgg11", 1, 7))), 9'228'423);
}

TEST(VggTest, Vgg16And19ParameterCounts) {
  // The same sum Σ (9·in·out + 3·out) + 513·10 over configurations D and E.
  EXPECT_EQ(parameterCount(*makeModel(imageOptions("vgg16", 3, 10))), 14'728'266);
  EXPECT_EQ(parameterCount(*makeModel(imageOptions("vgg19", 3, 10))), 20'040'522);
}

TEST(VggTest, TorchvisionNamesAndInit) {
  torch::manual_seed(4);
  auto m = makeModel(imageOptions("vgg11", 3, 10));
  auto params = m->named_parameters();
  auto keys = params.keys();
  // 8 convs x (weight, bias) + 8 BNs x 2 + classifier 2 = 34, in forward order.
  ASSERT_EQ(keys.size(), 34u);
  EXPECT_EQ(keys[0], "features.0.weight");  // conv
  EXPECT_EQ(keys[2], "features.1.weight");  // its BN
  EXPECT_EQ(keys[4], "features.4.weight");  // the next conv (2 is ReLU, 3 the max-pool)
  EXPECT_EQ(keys.back(), "classifier.bias");
  // classifier ~ normal(0, 0.01): 5,120 samples, sample std relative error ~ 1/sqrt(2·5120) = 1%; allow 10%.
  EXPECT_NEAR(params["classifier.weight"].std().item<double>(), 0.01, 0.001);
  EXPECT_TRUE(params["features.0.bias"].eq(0).all().item<bool>());
}

TEST(VggTest, OutputShapes) {
  torch::manual_seed(5);
  for (const std::string name : {"vgg11", "vgg16", "vgg19"}) {
    for (auto [channels, size] : {std::pair<int64_t, int64_t>{1, 28}, {3, 32}}) {
      auto m = makeModel(imageOptions(name, channels, 7));
      torch::NoGradGuard noGrad;
      auto y = m->forward(torch::randn({2, channels, size, size}));
      EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 7})) << name << " on " << size << "x" << size;
    }
  }
}

TEST(VggTest, EveryParameterGetsAGradient) {
  torch::manual_seed(6);
  auto m = makeModel(imageOptions("vgg11", 1, 10));
  testing::expectEveryParameterGetsGradient(*m, testing::classificationLoss(m->forward(torch::randn({4, 1, 28, 28}))));
}

}  // namespace
}  // namespace gradzip::models
