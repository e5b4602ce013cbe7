// Tests data/Transforms.h against a naive per-pixel reference that replays the
// same Rng draws, plus the normalisation formula and the flip rate.
#include "data/Transforms.h"

#include "tests/data/DataTestFiles.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gradzip::data {
namespace {

using namespace gradzip::data::testing;

at::Tensor makeImages(int64_t b, int64_t h, int64_t w, int64_t c) {
  at::Tensor t = at::empty({b, h, w, c}, at::kByte);
  auto a = t.accessor<uint8_t, 4>();
  for (int64_t n = 0; n < b; ++n)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < c; ++k) a[n][y][x][k] = pixel(n, y, x, k);
  return t;
}

// out[n][k][y][x] = (src(y+dy-p, x'+dx-p, k)/255 - mean_k)/std_k with x' = W-1-x when
// flipped, 0 outside the source: crop with zero padding, then mirror.
at::Tensor reference(const at::Tensor& images, const TransformOptions& o, Rng rng) {
  const int64_t b = images.size(0), h = images.size(1), w = images.size(2), c = images.size(3);
  const int64_t p = o.cropPadding;
  at::Tensor out = at::empty({b, c, h, w}, at::kFloat);
  auto src = images.accessor<uint8_t, 4>();
  auto dst = out.accessor<float, 4>();
  for (int64_t n = 0; n < b; ++n) {
    int64_t dy = p, dx = p;
    if (p > 0) {
      dy = int64_t(rng.uniformInt(uint64_t(2 * p + 1)));
      dx = int64_t(rng.uniformInt(uint64_t(2 * p + 1)));
    }
    bool flip = o.flip && rng.bernoulli(0.5);
    for (int64_t k = 0; k < c; ++k)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          int64_t sy = y + dy - p, sx = (flip ? w - 1 - x : x) + dx - p;
          float v = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? src[n][sy][sx][k] : 0;
          double mean = o.mean.empty() ? 0 : o.mean[size_t(k) % o.mean.size()];
          double sd = o.std.empty() ? 1 : o.std[size_t(k) % o.std.size()];
          dst[n][k][y][x] = float((v / 255.0 - mean) / sd);
        }
  }
  return out;
}

TEST(Transforms, NormaliseOnlyMatchesFormulaAndLayout) {
  at::Tensor images = makeImages(2, 3, 4, 3);
  TransformOptions o{0, false, {0.1, 0.2, 0.3}, {0.5, 0.25, 2.0}};
  ImageTransform t(o, 3);
  Rng rng(1);
  at::Tensor out = t.apply(images, rng, true);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2, 3, 3, 4}));
  EXPECT_TRUE(at::allclose(out, reference(images, o, Rng(1)), 1e-5, 1e-6));
  // One value by hand: image 1, channel 2, y 2, x 3.
  EXPECT_NEAR(out[1][2][2][3].item<float>(), (pixel(1, 2, 3, 2) / 255.0 - 0.3) / 2.0, 1e-6);
}

TEST(Transforms, CropAndFlipMatchReferenceForEveryImage) {
  for (int64_t channels : {1, 3}) {
    at::Tensor images = makeImages(64, 7, 9, channels);
    TransformOptions o{3, true, {0.5}, {0.25}};
    ImageTransform t(o, channels);
    Rng rng(42);
    at::Tensor out = t.apply(images, rng, true);
    EXPECT_TRUE(at::allclose(out, reference(images, o, Rng(42)), 1e-5, 1e-6)) << channels;
    // The dataset's own pixels are never modified.
    EXPECT_TRUE(at::equal(images, makeImages(64, 7, 9, channels)));
  }
}

TEST(Transforms, AugmentOffOnlyNormalisesAndDrawsNothing) {
  at::Tensor images = makeImages(4, 5, 5, 1);
  TransformOptions o{2, true, {}, {}};
  ImageTransform t(o, 1);
  Rng rng(7);
  at::Tensor out = t.apply(images, rng, false);
  EXPECT_TRUE(at::allclose(out, images.permute({0, 3, 1, 2}).to(at::kFloat) / 255.0));
  Rng fresh(7);
  EXPECT_EQ(rng.next(), fresh.next());
}

TEST(Transforms, SameRngSameBatchDifferentRngDifferentBatch) {
  at::Tensor images = makeImages(32, 8, 8, 3);
  ImageTransform t({4, true, {}, {}}, 3);
  Rng a(5), b(5), c(6);
  at::Tensor x = t.apply(images, a, true);
  EXPECT_TRUE(at::equal(x, t.apply(images, b, true)));
  EXPECT_FALSE(at::equal(x, t.apply(images, c, true)));
}

TEST(Transforms, FlipRateIsOneHalf) {
  // An asymmetric 1x2 image [0, 255] is flipped iff the output reads [255, 0].
  // Flips are Bernoulli(1/2): over N images the count has mean N/2 and standard
  // deviation sqrt(N/4); we allow 5 sigma.
  const int64_t n = 4000;
  at::Tensor images = at::empty({n, 1, 2, 1}, at::kByte);
  images.select(2, 0).fill_(0);
  images.select(2, 1).fill_(255);
  ImageTransform t({0, true, {}, {}}, 1);
  Rng rng(2024);
  at::Tensor out = t.apply(images, rng, true);
  double flipped = (out.select(3, 0) > 0.5).sum().item<double>();
  EXPECT_NEAR(flipped, n / 2.0, 5 * std::sqrt(n / 4.0));
}

TEST(Transforms, RejectsBadOptions) {
  EXPECT_THROW(ImageTransform({0, false, {0.1, 0.2}, {}}, 3), UserError);
  EXPECT_THROW(ImageTransform({0, false, {}, {0.0}}, 1), UserError);
  EXPECT_THROW(ImageTransform({-1, false, {}, {}}, 1), UserError);
}

}  // namespace
}  // namespace gradzip::data
