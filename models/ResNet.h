// Residual networks (He et al. 2016, "Deep Residual Learning for Image
// Recognition"). resnet18/resnet50 follow torchvision's layout and parameter
// names exactly (conv1, bn1, layer1..layer4 of BasicBlock/Bottleneck with the
// stride on the 3x3 conv, "v1.5", fc), so their state dicts line up with
// torchvision's; resnet20/32/56/110 are the CIFAR networks of He et al. §4.2:
// a 3x3 conv to 16 channels, three stages of n = (depth-2)/6 basic blocks at
// 16/32/64 channels (strides 1, 2, 2), global average pooling and fc.
// Any input size works (global average pooling before fc).
#pragma once

#include "models/Model.h"
#include "models/ModelOptions.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <vector>

namespace gradzip::models {

namespace detail {
class ResidualBlock;  // BasicBlock or Bottleneck, defined in ResNet.cpp
}  // namespace detail

class ResNet : public Model {
 public:
  // Uses options.name (depth), inChannels, numClasses and options.resnet.
  // Initialisation as torchvision: convs kaiming-normal (fan_out, ReLU gain),
  // BN weight 1 and bias 0, fc PyTorch's default Linear init.
  explicit ResNet(const ModelOptions& options);

  // images [B, inChannels, H, W] -> logits [B, numClasses].
  at::Tensor forward(const at::Tensor& input) override;
  ModelKind kind() const override { return ModelKind::kClassification; }

 private:
  int64_t inChannels_;
  bool maxPool_ = false;  // torchvision's ImageNet stem: 3x3/2 max-pool after conv1
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  std::vector<std::shared_ptr<detail::ResidualBlock>> blocks_;  // all stages, forward order
  torch::nn::Linear fc_{nullptr};
};

}  // namespace gradzip::models
