// VGG with batch normalisation (Simonyan & Zisserman 2015, configurations A/D/E
// = vgg11/16/19; BN after every conv as torchvision's vgg*_bn) and the CIFAR-style
// head used by the gradient-compression papers: the 512-channel features are
// pooled to 1x1 and a single Linear(512, classes) classifies them (no 4096-wide
// FC layers). Parameter names follow torchvision ("features.<i>", then
// "classifier"). The max-pools use ceil mode so that 28x28 Fashion-MNIST
// (28-14-7-4-2-1) works as well as 32x32 CIFAR (32-16-8-4-2-1, identical to
// floor mode there); adaptive average pooling makes larger inputs work too.
#pragma once

#include "models/Model.h"
#include "models/ModelOptions.h"

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

namespace gradzip::models {

class Vgg : public Model {
 public:
  // Uses options.name (vgg11, vgg16, vgg19), inChannels and numClasses.
  // Initialisation as torchvision: convs kaiming-normal (fan_out, ReLU gain) with
  // zero bias, BN weight 1 and bias 0, classifier normal(0, 0.01) with zero bias.
  explicit Vgg(const ModelOptions& options);

  // images [B, inChannels, H, W] (H, W >= 1) -> logits [B, numClasses].
  at::Tensor forward(const at::Tensor& input) override;
  ModelKind kind() const override { return ModelKind::kClassification; }

 private:
  int64_t inChannels_;
  torch::nn::Sequential features_{nullptr};
  torch::nn::Linear classifier_{nullptr};
};

}  // namespace gradzip::models
