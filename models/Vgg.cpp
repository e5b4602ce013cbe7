// Implements models/Vgg.h: the VGG-BN feature stacks and the CIFAR head.
#include "models/Vgg.h"

#include "util/Error.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>

#include <vector>

namespace gradzip::models {
namespace {

namespace nn = torch::nn;

constexpr int64_t kPool = 0;  // "M" in the configuration tables

// Simonyan & Zisserman Table 1, configurations A (11), D (16) and E (19):
// output channels of each 3x3 conv, kPool for a 2x2/2 max-pool.
std::vector<int64_t> configOf(const std::string& name) {
  if (name == "vgg11") return {64, kPool, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool};
  if (name == "vgg16")
    return {64, 64, kPool, 128, 128, kPool, 256, 256, 256, kPool, 512, 512, 512, kPool, 512, 512, 512, kPool};
  if (name == "vgg19")
    return {64,  64,  kPool, 128, 128, kPool, 256, 256, 256, 256, kPool,
            512, 512, 512,   512, kPool, 512, 512, 512, 512, kPool};
  throw UserError(fmt::format("VGG: no configuration for model '{}'", name));
}

}  // namespace

Vgg::Vgg(const ModelOptions& options) : Model(options.name), inChannels_(options.inChannels) {
  features_ = nn::Sequential();
  int64_t channels = inChannels_;
  for (int64_t v : configOf(options.name)) {
    if (v == kPool) {
      features_->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2).ceil_mode(true)));
      continue;
    }
    nn::Conv2d conv(nn::Conv2dOptions(channels, v, 3).padding(1));
    nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
    nn::init::zeros_(conv->bias);
    features_->push_back(conv);
    features_->push_back(nn::BatchNorm2d(v));
    features_->push_back(nn::ReLU(nn::ReLUOptions(/*inplace=*/true)));
    channels = v;
  }
  register_module("features", features_);
  classifier_ = register_module("classifier", nn::Linear(channels, options.numClasses));
  nn::init::normal_(classifier_->weight, 0.0, 0.01);
  nn::init::zeros_(classifier_->bias);
}

at::Tensor Vgg::forward(const at::Tensor& input) {
  GZ_CHECK(input.dim() == 4 && input.size(1) == inChannels_,
           "model '{}' expects images [B, {}, H, W], got a tensor of shape {}", name(), inChannels_,
           shapeOf(input));
  at::Tensor x = features_->forward(input);
  x = at::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return classifier_->forward(x);
}

}  // namespace gradzip::models
