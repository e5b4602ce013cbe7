// Implements models/ResNet.h: the two residual blocks, the two shortcut kinds
// (He et al. §3.3 options A and B) and the ImageNet / CIFAR network layouts.
#include "models/ResNet.h"

#include "util/Error.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include <string>

namespace gradzip::models {
namespace detail {

// A residual block: out = relu(F(x) + shortcut(x)).
class ResidualBlock : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
};

}  // namespace detail

namespace {

namespace nn = torch::nn;

// A bias-free conv (the BN after it has the bias), kaiming-normal with
// fan_out and ReLU gain as torchvision's ResNet.__init__.
nn::Conv2d makeConv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  nn::Conv2d c(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
  nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
  return c;
}

// The shortcut of a block whose input has `in` channels and whose output has
// `out` channels at stride `stride`. Identity when nothing changes; otherwise
// option B (projection: 1x1 conv + BN, registered as `downsample` like
// torchvision) or option A (zeropad: subsample, then append zero channels;
// parameter-free, He et al. §4.2).
class Shortcut {
 public:
  Shortcut(nn::Module& owner, int64_t in, int64_t out, int64_t stride, bool zeroPad)
      : in_(in), out_(out), stride_(stride) {
    if (stride == 1 && in == out) return;  // identity
    if (zeroPad) {
      GZ_ASSERT(out >= in, "zero-padding shortcut cannot shrink {} -> {} channels", in, out);
      zeroPad_ = true;
      return;
    }
    downsample_ = owner.register_module("downsample", nn::Sequential(makeConv(in, out, 1, stride),
                                                                      nn::BatchNorm2d(out)));
  }

  at::Tensor operator()(const at::Tensor& x) {
    if (downsample_) return downsample_->forward(x);
    if (!zeroPad_) return x;
    at::Tensor sub = stride_ == 1 ? x : x.slice(2, 0, c10::nullopt, stride_).slice(3, 0, c10::nullopt, stride_);
    // pad spec runs from the last dim: (W lo, W hi, H lo, H hi, C lo, C hi).
    return at::constant_pad_nd(sub, {0, 0, 0, 0, 0, out_ - in_});
  }

 private:
  int64_t in_, out_, stride_;
  bool zeroPad_ = false;
  nn::Sequential downsample_{nullptr};
};

// torchvision BasicBlock (expansion 1): 3x3 (stride) -> BN -> ReLU -> 3x3 -> BN.
class BasicBlock : public detail::ResidualBlock {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in, int64_t planes, int64_t stride, bool zeroPad)
      : conv1_(register_module("conv1", makeConv(in, planes, 3, stride))),
        bn1_(register_module("bn1", nn::BatchNorm2d(planes))),
        conv2_(register_module("conv2", makeConv(planes, planes, 3, 1))),
        bn2_(register_module("bn2", nn::BatchNorm2d(planes))),
        shortcut_(*this, in, planes, stride, zeroPad) {}

  at::Tensor forward(const at::Tensor& x) override {
    // In-place ReLU and add are safe: BN's backward needs its input, not its output.
    at::Tensor out = bn1_->forward(conv1_->forward(x));
    out.relu_();
    out = bn2_->forward(conv2_->forward(out));
    out.add_(shortcut_(x));
    out.relu_();
    return out;
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  Shortcut shortcut_;
};

// torchvision Bottleneck (expansion 4, "ResNet v1.5": stride on the 3x3):
// 1x1 -> BN -> ReLU -> 3x3 (stride) -> BN -> ReLU -> 1x1 (x4) -> BN.
class Bottleneck : public detail::ResidualBlock {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in, int64_t planes, int64_t stride, bool zeroPad)
      : conv1_(register_module("conv1", makeConv(in, planes, 1, 1))),
        bn1_(register_module("bn1", nn::BatchNorm2d(planes))),
        conv2_(register_module("conv2", makeConv(planes, planes, 3, stride))),
        bn2_(register_module("bn2", nn::BatchNorm2d(planes))),
        conv3_(register_module("conv3", makeConv(planes, planes * kExpansion, 1, 1))),
        bn3_(register_module("bn3", nn::BatchNorm2d(planes * kExpansion))),
        shortcut_(*this, in, planes * kExpansion, stride, zeroPad) {}

  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor out = bn1_->forward(conv1_->forward(x));
    out.relu_();
    out = bn2_->forward(conv2_->forward(out));
    out.relu_();
    out = bn3_->forward(conv3_->forward(out));
    out.add_(shortcut_(x));
    out.relu_();
    return out;
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Conv2d conv3_;
  nn::BatchNorm2d bn3_;
  Shortcut shortcut_;
};

// The layout of one depth.
struct Layout {
  bool bottleneck;
  std::vector<int64_t> blocksPerStage;
  std::vector<int64_t> planes;  // per stage; stride 1 for the first stage, 2 after
};

Layout layoutOf(const std::string& name) {
  if (name == "resnet18") return {false, {2, 2, 2, 2}, {64, 128, 256, 512}};
  if (name == "resnet50") return {true, {3, 4, 6, 3}, {64, 128, 256, 512}};
  if (isCifarResNet(name)) {
    // He et al. §4.2: depth 6n + 2 (3 stages of n two-conv blocks, plus conv1 and fc).
    const int64_t depth = std::stoll(name.substr(6));
    const int64_t n = (depth - 2) / 6;
    GZ_ASSERT(6 * n + 2 == depth, "CIFAR ResNet depth {} is not 6n+2", depth);
    return {false, {n, n, n}, {16, 32, 64}};
  }
  throw UserError(fmt::format("ResNet: no layout for model '{}'", name));
}

template <class Block>
void addStages(nn::Module& self, const Layout& layout, int64_t& channels, bool zeroPad,
               std::vector<std::shared_ptr<detail::ResidualBlock>>& blocks) {
  for (size_t s = 0; s < layout.planes.size(); ++s) {
    nn::ModuleList stage;
    for (int64_t b = 0; b < layout.blocksPerStage[s]; ++b) {
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      auto block = std::make_shared<Block>(channels, layout.planes[s], stride, zeroPad);
      channels = layout.planes[s] * Block::kExpansion;
      stage->push_back(block);
      blocks.push_back(block);
    }
    self.register_module("layer" + std::to_string(s + 1), stage);
  }
}

}  // namespace

ResNet::ResNet(const ModelOptions& options) : Model(options.name), inChannels_(options.inChannels) {
  const Layout layout = layoutOf(options.name);
  const bool cifar = isCifarResNet(options.name);
  const bool zeroPad = options.resnet.shortcut == "zeropad";
  GZ_CHECK(!zeroPad || cifar, "model.resnet.shortcut: zeropad is only for the CIFAR ResNets, not {}", options.name);

  const int64_t width = layout.planes.front();
  if (cifar || options.resnet.stem == "cifar") {
    conv1_ = register_module("conv1", makeConv(inChannels_, width, 3, 1));
  } else {
    conv1_ = register_module("conv1", makeConv(inChannels_, width, 7, 2));
    maxPool_ = true;
  }
  bn1_ = register_module("bn1", nn::BatchNorm2d(width));

  int64_t channels = width;
  if (layout.bottleneck)
    addStages<Bottleneck>(*this, layout, channels, zeroPad, blocks_);
  else
    addStages<BasicBlock>(*this, layout, channels, zeroPad, blocks_);
  fc_ = register_module("fc", nn::Linear(channels, options.numClasses));
}

at::Tensor ResNet::forward(const at::Tensor& input) {
  GZ_CHECK(input.dim() == 4 && input.size(1) == inChannels_,
           "model '{}' expects images [B, {}, H, W], got a tensor of shape {}", name(), inChannels_,
           shapeOf(input));
  at::Tensor x = bn1_->forward(conv1_->forward(input));
  x.relu_();
  if (maxPool_) x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  for (const auto& block : blocks_) x = block->forward(x);
  x = at::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return fc_->forward(x);
}

}  // namespace gradzip::models
