// Implements data/Transforms.h.
#include "data/Transforms.h"

#include "util/Error.h"

#include <opencv2/core.hpp>

#include <algorithm>

namespace gradzip::data {
namespace {

at::Tensor perChannel(const std::vector<double>& v, int64_t channels, double def, const char* what) {
  GZ_CHECK(v.empty() || v.size() == 1 || int64_t(v.size()) == channels,
           "normalise.{}: expected 1 or {} values (one per channel), got {}", what, channels, v.size());
  std::vector<float> out(static_cast<size_t>(channels), static_cast<float>(def));
  for (int64_t c = 0; c < channels; ++c)
    if (!v.empty()) out[size_t(c)] = float(v.size() == 1 ? v[0] : v[size_t(c)]);
  return at::tensor(out).view({1, channels, 1, 1});
}

// Crops image `src` (H x W, any channel count) shifted by (dy - p, dx - p) into
// `dst`, filling uncovered pixels with zero: dst(y, x) = src(y + dy - p, x + dx - p).
void cropWithZeroPadding(const cv::Mat& src, cv::Mat& dst, int p, int dy, int dx) {
  dst.setTo(cv::Scalar::all(0));
  int sy = dy - p, sx = dx - p;  // source offset of dst's top-left pixel
  cv::Rect srcRect(std::max(0, sx), std::max(0, sy), 0, 0);
  srcRect.width = std::min(src.cols, src.cols + sx) - srcRect.x;
  srcRect.height = std::min(src.rows, src.rows + sy) - srcRect.y;
  if (srcRect.width <= 0 || srcRect.height <= 0) return;
  cv::Rect dstRect(srcRect.x - sx, srcRect.y - sy, srcRect.width, srcRect.height);
  src(srcRect).copyTo(dst(dstRect));
}

}  // namespace

ImageTransform::ImageTransform(TransformOptions options, int64_t channels) : options_(std::move(options)) {
  GZ_CHECK(options_.cropPadding >= 0, "augment.crop_padding must be >= 0, got {}", options_.cropPadding);
  mean_ = perChannel(options_.mean, channels, 0.0, "mean");
  at::Tensor stdev = perChannel(options_.std, channels, 1.0, "std");
  GZ_CHECK(stdev.min().item<float>() > 0, "normalise.std must be positive, got {}", options_.std);
  invStd_ = stdev.reciprocal();
}

at::Tensor ImageTransform::apply(const at::Tensor& images, Rng& rng, bool augment) const {
  GZ_ASSERT(images.dim() == 4 && images.scalar_type() == at::kByte, "expected uint8 [B,H,W,C]");
  at::Tensor x = images.contiguous();
  const int p = int(options_.cropPadding);
  if (augment && (p > 0 || options_.flip)) {
    x = x.clone();  // never write into the dataset's own pixels
    const int64_t b = x.size(0);
    const int h = int(x.size(1)), w = int(x.size(2)), c = int(x.size(3));
    const int type = CV_8UC(c);
    cv::Mat scratch(h, w, type);
    for (int64_t i = 0; i < b; ++i) {
      cv::Mat img(h, w, type, x[i].data_ptr<uint8_t>());
      if (p > 0) {
        int dy = int(rng.uniformInt(uint64_t(2 * p + 1)));
        int dx = int(rng.uniformInt(uint64_t(2 * p + 1)));
        img.copyTo(scratch);
        cropWithZeroPadding(scratch, img, p, dy, dx);
      }
      if (options_.flip && rng.bernoulli(0.5)) cv::flip(img, img, 1);
    }
  }
  // One pass per op over the whole batch: [B,H,W,C] uint8 -> [B,C,H,W] float.
  at::Tensor out = x.permute({0, 3, 1, 2}).to(at::kFloat).contiguous();
  out.mul_(1.0f / 255.0f).sub_(mean_).mul_(invStd_);
  return out;
}

}  // namespace gradzip::data
