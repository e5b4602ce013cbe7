// Per-batch image transforms: the standard CIFAR augmentation (random crop with
// zero padding, random horizontal flip; He et al. 2016, ResNet §4.2) and
// per-channel normalisation, turning a uint8 [B,H,W,C] batch into the float
// [B,C,H,W] batch a model takes. Crop and flip run per image in OpenCV on the
// uint8 pixels (a ROI copy and cv::flip, no float work); conversion and
// normalisation run once per batch as ATen ops. Every random choice comes from
// the caller's Rng, in a fixed order, so a batch is reproducible.
#pragma once

#include "data/Rng.h"

#include <ATen/ATen.h>

#include <vector>

namespace gradzip::data {

struct TransformOptions {
  int64_t cropPadding = 0;  // p > 0: pad by p zero pixels on each side, crop H x W at a random offset
  bool flip = false;        // mirror left-right with probability 1/2
  std::vector<double> mean;  // per channel, on the [0,1] pixel scale; empty = no centring
  std::vector<double> std;   // per channel, > 0; empty = no scaling
};

class ImageTransform {
 public:
  // Validates the options for images with `channels` channels (mean/std must have
  // 0, 1 or `channels` entries; a single value applies to every channel).
  ImageTransform(TransformOptions options, int64_t channels);

  // images: uint8 [B,H,W,C]. Returns float [B,C,H,W] = (pixel/255 - mean) / std,
  // after the random crop and flip when `augment` is true. For each image in
  // order, draws the crop offset (dy, then dx, each uniform in [0, 2p]) and then
  // the flip bit, only for the augmentations enabled.
  at::Tensor apply(const at::Tensor& images, Rng& rng, bool augment) const;

  const TransformOptions& options() const { return options_; }

 private:
  TransformOptions options_;
  at::Tensor mean_;    // float [1,C,1,1]
  at::Tensor invStd_;  // float [1,C,1,1]
};

}  // namespace gradzip::data
