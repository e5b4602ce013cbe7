// Tests compress/kernels/Hadamard: the fast transform against the Sylvester matrix,
// norm preservation, exact inversion with zero padding, shared-seed
// determinism, partial rotation equalling per-block rotation, and (at every
// SIMD level) the fast transform and the random signs against their plain
// definitions.
#include "compress/kernels/Hadamard.h"

#include "compress/kernels/CounterRng.h"
#include "tests/compress/kernels/SimdLevels.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace gradzip::compress {
namespace {

TEST(Hadamard, FwhtMatchesSylvesterMatrix) {
  const int64_t n = 16;
  // Sylvester: H[i][j] = (−1)^popcount(i & j).
  auto x = at::randn({n}, at::TensorOptions().dtype(at::kDouble)).to(at::kFloat);
  auto y = x.clone();
  fwhtInPlace(y.data_ptr<float>(), n, n);
  for (int64_t i = 0; i < n; ++i) {
    double ref = 0;
    for (int64_t j = 0; j < n; ++j)
      ref += (__builtin_popcountll(i & j) % 2 ? -1.0 : 1.0) * x[j].item<float>();
    EXPECT_NEAR(y[i].item<float>(), ref, 1e-4);
  }
}

TEST(Hadamard, PreservesNormAndInvertsWithPadding) {
  at::manual_seed(1);
  for (int64_t d : {1, 5, 1000, 70000}) {
    RandomizedHadamard rht(d);
    EXPECT_GE(rht.paddedDim(), d);
    EXPECT_EQ(rht.paddedDim() & (rht.paddedDim() - 1), 0);
    auto x = at::randn({d});
    auto r = rht.forward(x, 42);
    ASSERT_EQ(r.numel(), rht.paddedDim());
    // Orthonormal: ||Rx|| = ||x|| up to float accumulation (relative 1e-5).
    EXPECT_NEAR(r.norm().item<double>() / x.norm().item<double>(), 1.0, 1e-5);
    auto back = rht.inverse(r, 42);
    // Each output is a ±1/sqrt(B) combination of log2(B) rounding steps: 1e-5 relative.
    EXPECT_LE((back - x).abs().max().item<float>(), 1e-5 * x.abs().max().item<float>() * std::log2(rht.paddedDim() + 1) + 1e-7);
    // Same seed, same rotation; another seed, another rotation.
    EXPECT_TRUE(at::equal(rht.forward(x, 42), r));
    if (d > 4) {
      EXPECT_FALSE(at::allclose(rht.forward(x, 43), r));
    }
  }
}

TEST(Hadamard, PartialRotationRotatesBlocksSeparately) {
  at::manual_seed(2);
  const int64_t d = 3000;
  RandomizedHadamard partial(d, 8);  // blocks of 256
  EXPECT_EQ(partial.blockSize(), 256);
  EXPECT_EQ(partial.paddedDim(), 3072);
  auto x = at::randn({d});
  auto r = partial.forward(x, 7);
  // Block norms are preserved individually (each block orthonormal).
  auto xp = at::zeros({3072});
  xp.narrow(0, 0, d).copy_(x);
  for (int64_t b = 0; b < 12; ++b)
    EXPECT_NEAR(r.narrow(0, b * 256, 256).norm().item<double>(), xp.narrow(0, b * 256, 256).norm().item<double>(),
                1e-4);
  EXPECT_LE((partial.inverse(r, 7) - x).abs().max().item<float>(), 1e-5);
  // Large-stride path of the tiled transform (block > tile).
  RandomizedHadamard big(1 << 15);
  auto z = at::randn({1 << 15});
  EXPECT_LE((big.inverse(big.forward(z, 9), 9) - z).abs().max().item<float>(), 2e-5);
}

// fwhtInPlace (vectorised small strides, tiled large ones) equals the plain
// butterfly definition bit for bit, for blocks from 8 to 2^14.
TEST(Hadamard, FastTransformEqualsPlainButterfliesBitForBit) {
  testing::forEachSimdLevel([&] {
    // Blocks above 4096 take the large strides 2 (16384), 3, 4, 7 and 8 levels
    // (columns of 4, 8, 16, 16 + 8 and 16 + 16 registers) at a time.
    for (int64_t block : {8, 16, 64, 256, 512, 1024, 4096, 16384, 32768, 65536, 1 << 19, 1 << 20}) {
      const int64_t n = 2 * std::max<int64_t>(block, 4096);
      at::Tensor x = at::randn({n});
      at::Tensor ref = x.clone();
      float* r = ref.data_ptr<float>();
      for (int64_t b = 0; b < n; b += block)
        for (int64_t h = 1; h < block; h *= 2)
          for (int64_t i = b; i < b + block; i += 2 * h)
            for (int64_t j = i; j < i + h; ++j) {
              const float u = r[j], v = r[j + h];
              r[j] = u + v;
              r[j + h] = u - v;
            }
      fwhtInPlace(x.data_ptr<float>(), n, block);
      EXPECT_TRUE(at::equal(x, ref)) << block;
    }
  });
}

// D flips exactly the coordinates whose bit (i mod 64) of word i/64 is set,
// after the scale, for ranges that start and end inside words and 8-groups
// (the vector body, its scalar head and tail), at every SIMD level.
TEST(Hadamard, RandomSignsFollowTheirWordsBitByBit) {
  testing::forEachSimdLevel([&] {
    const uint64_t seed = 0x5EED;
    const at::Tensor x = at::randn({1000}, at::make_generator<at::CPUGeneratorImpl>(4));
    for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 1000}, {3, 997}, {64, 72}, {130, 901}, {5, 6}})
      for (float scale : {1.0f, 0.03125f, 0.7f}) {
        at::Tensor out = at::full({hi - lo}, 99.0f);
        applyRandomSigns(x.data_ptr<float>() + lo, lo, hi, seed, out.data_ptr<float>(), scale);
        int64_t wrong = 0;
        for (int64_t i = lo; i < hi; ++i) {
          const bool flip = (randomBits(seed, static_cast<uint64_t>(i / 64)) >> (i % 64)) & 1;
          const float v = x.data_ptr<float>()[i] * scale;
          wrong += out.data_ptr<float>()[i - lo] != (flip ? -v : v);
        }
        EXPECT_EQ(wrong, 0) << lo << ".." << hi << " scale " << scale;
      }
  });
}

}  // namespace
}  // namespace gradzip::compress
