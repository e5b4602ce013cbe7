// Tests of models/ResNet.{h,cpp}: parameter counts against torchvision and He et
// al., torchvision parameter names and order, output shapes on Fashion-MNIST-
// and CIFAR-shaped inputs, gradients reaching every parameter.
#include "models/ResNet.h"

#include "models/Registry.h"
#include "tests/models/ModelTesting.h"
#include "util/Error.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace gradzip::models {
namespace {

using testing::imageOptions;

int64_t count(const std::string& name, int64_t inChannels, int64_t classes, const std::string& shortcut = "projection",
              const std::string& stem = "imagenet") {
  auto o = imageOptions(name, inChannels, classes);
  o.resnet.shortcut = shortcut;
  o.resnet.stem = stem;
  return parameterCount(*makeModel(o));
}

TEST(ResNetTest, TorchvisionParameterCounts) {
  // torchvision.models.resnet18() / resnet50(): 3 input channels, 1000 classes.
  EXPECT_EQ(count("resnet18", 3, 1000), 11'689'512);
  EXPECT_EQ(count("resnet50", 3, 1000), 25'557'032);
}

TEST(ResNetTest, CifarStemResNet18) {
  // The 7x7x3x64 stem (9,408) becomes 3x3x3x64 (1,728); fc 512x10+10 = 5,130
  // instead of 513,000: 11,689,512 - 9,408 + 1,728 - 513,000 + 5,130.
  EXPECT_EQ(count("resnet18", 3, 10, "projection", "cifar"), 11'173'962);
}

TEST(ResNetTest, CifarResNetCountsMatchClosedForm) {
  // He et al. §4.2 with n blocks per stage, 3 input channels, 10 classes, zero-pad shortcuts:
  //   conv1 3·16·9 + BN 32                                 = 464
  //   stage 1: 2n convs 16·16·9 + BN 32                     = 4,672 n
  //   stage 2: 16·32·9 + 64, then (2n-1)·(32·32·9 + 64)     = 4,672 + 9,280 (2n-1)
  //   stage 3: 32·64·9 + 128, then (2n-1)·(64·64·9 + 128)   = 18,560 + 36,992 (2n-1)
  //   fc 64·10 + 10                                         = 650
  // Total = 97,216 n - 21,926: 269,722 (n=3), 464,154 (5), 853,018 (9), 1,727,962 (18).
  for (auto [name, n] : {std::pair{"resnet20", 3}, {"resnet32", 5}, {"resnet56", 9}, {"resnet110", 18}})
    EXPECT_EQ(count(name, 3, 10, "zeropad"), 97'216 * n - 21'926) << name;
  EXPECT_EQ(count("resnet20", 3, 10, "zeropad"), 269'722);
  // Projection shortcuts add 16·32 + 2·32 = 576 and 32·64 + 2·64 = 2,176.
  EXPECT_EQ(count("resnet20", 3, 10, "projection"), 272'474);
}

TEST(ResNetTest, TorchvisionNamesInForwardOrder) {
  auto m = makeModel(imageOptions("resnet18", 3, 10));
  auto names = m->named_parameters().keys();
  // conv1 + bn1 (3), 8 blocks x 6, 3 downsamples x 3, fc (2) = 62 tensors, as torchvision.
  ASSERT_EQ(names.size(), 62u);
  EXPECT_EQ(names.front(), "conv1.weight");
  EXPECT_EQ(names[3], "layer1.0.conv1.weight");
  EXPECT_EQ(names.back(), "fc.bias");
  EXPECT_TRUE(m->named_parameters().contains("layer2.0.downsample.0.weight"));
  EXPECT_TRUE(m->named_parameters().contains("layer4.1.bn2.bias"));
  EXPECT_TRUE(m->named_buffers().contains("layer3.0.downsample.1.running_var"));
  // Zero-pad shortcuts have no parameters at all.
  auto o = imageOptions("resnet20", 3, 10);
  o.resnet.shortcut = "zeropad";
  for (const auto& key : makeModel(o)->named_parameters().keys())
    EXPECT_EQ(key.find("downsample"), std::string::npos) << key;
}

TEST(ResNetTest, KaimingFanOutInit) {
  torch::manual_seed(1);
  auto m = makeModel(imageOptions("resnet20", 3, 10));
  // kaiming_normal_(fan_out, relu): std = sqrt(2 / (out·k·k)). layer3 convs:
  // 64·64·9 = 36,864 weights, fan_out 576, std 0.0589; the sample std of N normals
  // has relative std about 1/sqrt(2N) = 0.0037, so 5% is > 10 sigma.
  const auto w = m->named_parameters()["layer3.1.conv1.weight"];
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / 576), 0.05 * std::sqrt(2.0 / 576));
  EXPECT_TRUE(m->named_parameters()["bn1.weight"].eq(1).all().item<bool>());
  EXPECT_TRUE(m->named_parameters()["bn1.bias"].eq(0).all().item<bool>());
}

TEST(ResNetTest, OutputShapes) {
  torch::manual_seed(0);
  for (const std::string name : {"resnet18", "resnet50", "resnet20", "resnet32", "resnet56"}) {
    for (auto [channels, size] : {std::pair<int64_t, int64_t>{1, 28}, {3, 32}}) {
      auto m = makeModel(imageOptions(name, channels, 7));
      EXPECT_EQ(m->kind(), ModelKind::kClassification);
      torch::NoGradGuard noGrad;
      auto y = m->forward(torch::randn({2, channels, size, size}));
      EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 7})) << name << " on " << size << "x" << size;
    }
  }
}

TEST(ResNetTest, RejectsWrongChannelCount) {
  auto m = makeModel(imageOptions("resnet20", 1, 10));
  try {
    m->forward(torch::randn({2, 3, 28, 28}));
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("[B, 1, H, W]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 3, 28, 28]"), std::string::npos) << e.what();
  }
}

TEST(ResNetTest, ZeroPadShortcutIsIdentityPlusZeroChannels) {
  // With every conv weight zero, each block's residual branch is BN(0) = BN bias
  // = 0, so a block outputs relu(shortcut(x)). x >= 0 after the stem's ReLU, so
  // stage 2's first block maps x to [x[:, :, ::2, ::2], zeros] exactly.
  torch::manual_seed(2);
  auto o = imageOptions("resnet20", 3, 10);
  o.resnet.shortcut = "zeropad";
  auto m = makeModel(o);
  torch::NoGradGuard noGrad;
  for (auto& p : m->named_parameters())
    if (p.key().find("layer") == 0 && p.key().find("conv") != std::string::npos) p.value().zero_();
  m->eval();
  // Read the pooled features through fc: logit c = pooled channel c.
  auto fc = m->named_parameters()["fc.weight"];
  fc.zero_();
  m->named_parameters()["fc.bias"].zero_();
  for (int64_t c = 0; c < 10; ++c) fc[c][c] = 1.0;
  auto x = torch::rand({1, 3, 8, 8});
  auto y = m->forward(x);
  // Reference: stem only (conv1, BN in eval with fresh statistics = identity
  // up to 1/sqrt(1 + eps)), ReLU, then subsampling twice (stages 2 and 3) and
  // global average pooling over the remaining 2x2 positions.
  auto stem = torch::relu(torch::conv2d(x, m->named_parameters()["conv1.weight"], {}, 1, 1) / std::sqrt(1.0 + 1e-5));
  auto sub = stem.index({torch::indexing::Slice(), torch::indexing::Slice(), torch::indexing::Slice(0, c10::nullopt, 4),
                         torch::indexing::Slice(0, c10::nullopt, 4)});
  auto expected = sub.mean({2, 3}).slice(1, 0, 10);
  EXPECT_TRUE(torch::allclose(y, expected, 1e-5, 1e-6)) << y << expected;
}

TEST(ResNetTest, EveryParameterGetsAGradient) {
  torch::manual_seed(3);
  for (const std::string shortcut : {"projection", "zeropad"}) {
    auto o = imageOptions("resnet20", 3, 10);
    o.resnet.shortcut = shortcut;
    auto m = makeModel(o);
    auto logits = m->forward(torch::randn({4, 3, 32, 32}));
    testing::expectEveryParameterGetsGradient(*m, testing::classificationLoss(logits));
  }
  auto m = makeModel(imageOptions("resnet50", 1, 10));
  testing::expectEveryParameterGetsGradient(*m, testing::classificationLoss(m->forward(torch::randn({2, 1, 28, 28}))));
}

}  // namespace
}  // namespace gradzip::models
