// Tests compress/kernels/SimdKernels.{h,cpp} and the vectorised codecs built on it
// against scalar references: the fused casts equal at::Tensor::to() bit for bit
// (every length from 0 to 70, so vector bodies and scalar tails both run), a
// single NaN or Inf at any position is detected, reusable buffers are never
// handed out while a caller holds them, chunk norms equal the plain sums of
// squares, and C_nat's vectorised encoder/decoder equal naturalEncode /
// naturalDecode element by element (on wide and on gradient-like inputs, and
// for every code byte), and the vectorised uniform stream equals CounterRng's.
// Each of these runs at every SIMD level the CPU has (SimdLevels.h).
#include "compress/kernels/SimdKernels.h"

#include "comm/LocalCommunicator.h"
#include "compress/Factory.h"
#include "compress/NaturalCompression.h"
#include "compress/kernels/CounterRng.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/compress/kernels/SimdLevels.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

namespace gradzip::compress {
namespace {

// Log-normal magnitudes over many decades (including fp16 subnormals and
// overflow), random signs.
at::Tensor wideInput(int64_t n, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor mag = at::randn({n}, gen, at::kFloat).mul_(6.0).exp_();
  at::Tensor sign = at::randint(0, 2, {n}, gen, at::kFloat).mul_(2).sub_(1);
  return mag.mul_(sign);
}

TEST(SimdKernels, CastsEqualATenBitForBit) {
  testing::forEachSimdLevel([&] {
    for (int64_t n = 0; n <= 70; ++n) {
      const at::Tensor x = wideInput(n, 100 + n);
      for (float div : {1.0f, 3.0f}) {
        at::Tensor h = at::empty({n}, at::kHalf), b = at::empty({n}, at::kBFloat16);
        EXPECT_TRUE(simd::floatToHalf(x.data_ptr<float>(), div, h.data_ptr<c10::Half>(), n));
        EXPECT_TRUE(simd::floatToBf16(x.data_ptr<float>(), div, b.data_ptr<c10::BFloat16>(), n));
        EXPECT_TRUE(testing::bitEqual(h, x.div(div).to(at::kHalf))) << n << " " << div;
        EXPECT_TRUE(testing::bitEqual(b, x.div(div).to(at::kBFloat16))) << n << " " << div;
        for (float mul : {1.0f, 3.0f}) {
          at::Tensor fh = at::empty({n}, at::kFloat), fb = at::empty({n}, at::kFloat);
          simd::halfToFloat(h.data_ptr<c10::Half>(), mul, fh.data_ptr<float>(), n);
          simd::bf16ToFloat(b.data_ptr<c10::BFloat16>(), mul, fb.data_ptr<float>(), n);
          EXPECT_TRUE(testing::bitEqual(fh, h.to(at::kFloat).mul_(mul))) << n;
          EXPECT_TRUE(testing::bitEqual(fb, b.to(at::kFloat).mul_(mul))) << n;
        }
      }
    }
  });
}

// AVX-512 BF16's conversion treats subnormal inputs as zero; the kernel must
// round them as at::Tensor::to() does, wherever they sit (a 32-float step of
// the vector loop, or its tail), also when the division makes them.
TEST(SimdKernels, Bf16CastOfSubnormalsEqualsATen) {
  testing::forEachSimdLevel([&] {
    const float sub = std::numeric_limits<float>::denorm_min();
    for (int64_t n : {16, 32, 64, 100}) {
      for (int64_t pos = 0; pos < n; pos += 7) {
        at::Tensor x = wideInput(n, 300 + pos);
        auto* p = x.data_ptr<float>();
        p[pos] = (pos % 2 ? -1.0f : 1.0f) * sub * static_cast<float>(12345 + pos);  // subnormal, odd mantissas
        if (pos + 1 < n) p[pos + 1] = 0.0f;
        if (pos + 2 < n) p[pos + 2] = std::numeric_limits<float>::min() * 1.5f;  // normal; / 3 is subnormal
        for (float div : {1.0f, 3.0f}) {
          at::Tensor b = at::empty({n}, at::kBFloat16);
          EXPECT_TRUE(simd::floatToBf16(p, div, b.data_ptr<c10::BFloat16>(), n));
          EXPECT_TRUE(testing::bitEqual(b, x.div(div).to(at::kBFloat16))) << n << " " << pos << " " << div;
        }
      }
    }
  });
}

TEST(SimdKernels, NonFiniteIsFoundAtEveryPosition) {
  testing::forEachSimdLevel([&] {
    const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity()};
    const int64_t n = 53;  // three 16-wide bodies and a tail
    std::vector<float> sq(n);  // room for C = 5
    for (float v : bad)
      for (int64_t pos = 0; pos < n; ++pos) {
        at::Tensor x = wideInput(n, 7);
        x[pos] = v;
        const float* p = x.data_ptr<float>();
        at::Tensor h = at::empty({n}, at::kHalf), b = at::empty({n}, at::kBFloat16), f = at::empty({n}, at::kFloat);
        EXPECT_FALSE(simd::allFinite(p, n)) << pos;
        EXPECT_FALSE(simd::floatToHalf(p, 1.0f, h.data_ptr<c10::Half>(), n)) << pos;
        EXPECT_FALSE(simd::floatToHalf(p, 2.0f, h.data_ptr<c10::Half>(), n)) << pos;
        EXPECT_FALSE(simd::floatToBf16(p, 1.0f, b.data_ptr<c10::BFloat16>(), n)) << pos;
        EXPECT_FALSE(simd::copyFinite(p, f.data_ptr<float>(), n)) << pos;
        EXPECT_FALSE(simd::chunkSquaredNorms(p, n, 16, sq.data())) << pos;
        EXPECT_FALSE(simd::chunkSquaredNorms(p, n, 5, sq.data())) << pos;
      }
    // The largest finite float is finite.
    at::Tensor x = at::full({33}, std::numeric_limits<float>::max());
    EXPECT_TRUE(simd::allFinite(x.data_ptr<float>(), 33));
  });
}

TEST(SimdKernels, ChunkNormsAreSumsOfSquares) {
  testing::forEachSimdLevel([&] {
    for (int64_t C : {16, 64, 5}) {
      const int64_t d = 1000;  // not a multiple of C: a short last chunk
      const at::Tensor x = testing::gaussianInput(d, 0, 3);
      std::vector<float> sq((d + C - 1) / C);
      ASSERT_TRUE(simd::chunkSquaredNorms(x.data_ptr<float>(), d, C, sq.data()));
      for (size_t c = 0; c < sq.size(); ++c) {
        const int64_t start = static_cast<int64_t>(c) * C, len = std::min(C, d - start);
        const double exact = x.narrow(0, start, len).to(at::kDouble).square().sum().item<double>();
        // float sum of at most 64 positive terms: relative error <= 64·2^-24
        EXPECT_NEAR(sq[c], exact, exact * 64 * std::ldexp(1.0, -24) + 1e-30) << C << " " << c;
      }
    }
  });
}

// Outputs of simd::kStreamBytes and more take the non-temporal store path.
TEST(SimdKernels, StreamingPathsEqualTheReference) {
  testing::forEachSimdLevel([&] {
    const int64_t n = simd::kStreamBytes / 4 + 37;
    const at::Tensor x = wideInput(n, 3).mul_(1e-6);
    const at::Tensor h = x.to(at::kHalf);
    at::Tensor f = at::empty({n});
    simd::halfToFloat(h.data_ptr<c10::Half>(), 1.0f, f.data_ptr<float>(), n);
    EXPECT_TRUE(testing::bitEqual(f, h.to(at::kFloat)));
    const at::Tensor b = x.to(at::kBFloat16);
    simd::bf16ToFloat(b.data_ptr<c10::BFloat16>(), 1.0f, f.data_ptr<float>(), n);
    EXPECT_TRUE(testing::bitEqual(f, b.to(at::kFloat)));
    comm::LocalCommunicator local;
    Context ctx = testing::contextFor(local);
    auto c = makeCompressor("cnat", "{}");
    Payload p = c->encode(x, ctx);
    const at::Tensor y = c->decode(p, n, ctx);
    const uint8_t* codes = p.tensors[0].data_ptr<uint8_t>();
    const float* yp = y.data_ptr<float>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += yp[i] != naturalDecode(codes[i]);
    EXPECT_EQ(wrong, 0);
  });
}

TEST(SimdKernels, UniformStreamEqualsCounterRng) {
  testing::forEachSimdLevel([&] {
    for (uint64_t first : {0ULL, 5ULL, (1ULL << 40) + 3}) {
      const int64_t n = 67;
      std::vector<float> u(n);
      simd::uniform01HalfFill(0xABCDEFULL, first, n, u.data());
      for (int64_t k = 0; k < n; ++k) EXPECT_EQ(u[k], uniform01Half(0xABCDEFULL, first + k)) << first << " " << k;
    }
  });
}

// level() is the CPU's tier capped by capLevel; the names round-trip and an
// unknown name is refused with the accepted ones.
TEST(SimdKernels, LevelIsTheCpuTierUnderTheCap) {
  const simd::Level cpu = simd::cpuLevel();
  const simd::Level before = simd::capLevel(simd::Level::kPortable);
  EXPECT_EQ(simd::level(), simd::Level::kPortable);
  EXPECT_FALSE(simd::haveAvx2());
  EXPECT_FALSE(simd::haveAvx512());
  EXPECT_EQ(simd::capLevel(simd::Level::kAvx512), simd::Level::kPortable);
  EXPECT_EQ(simd::level(), cpu);
  simd::capLevel(before);
  for (simd::Level l : {simd::Level::kPortable, simd::Level::kAvx2, simd::Level::kAvx512})
    EXPECT_EQ(simd::parseLevel(simd::levelName(l)), l);
  try {
    simd::parseLevel("sse2");
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("'sse2'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("portable, avx2 or avx512"), std::string::npos) << e.what();
  }
}

TEST(SimdKernels, ReusableBufferIsNeverSharedWithAHolder) {
  at::Tensor cache;
  at::Tensor a = simd::reusableBuffer(cache, 100, at::kFloat);
  void* first = a.data_ptr();
  at::Tensor b = simd::reusableBuffer(cache, 100, at::kFloat);  // a is still held
  EXPECT_NE(b.data_ptr(), first);
  at::Tensor view = b.narrow(0, 10, 5);  // a view keeps b's storage alive
  void* second = b.data_ptr();
  b = at::Tensor();
  at::Tensor c = simd::reusableBuffer(cache, 100, at::kFloat);
  EXPECT_NE(c.data_ptr(), second);
  void* third = c.data_ptr();
  c = at::Tensor();
  at::Tensor d = simd::reusableBuffer(cache, 100, at::kFloat);  // nobody holds it: reused
  EXPECT_EQ(d.data_ptr(), third);
  EXPECT_EQ(simd::reusableBuffer(cache, 50, at::kFloat).numel(), 50);  // other size: fresh
}

// The vectorised C_nat codec equals the scalar definition code by code, in
// both variants, including values below 2^-50, above 2^10, zeros and a tail.
TEST(SimdKernels, NaturalCompressionCodecEqualsScalarDefinition) {
  testing::forEachSimdLevel([&] {
    comm::LocalCommunicator local;
    Context ctx = testing::contextFor(local);
    ctx.seed = 9;
    const int64_t n = 4099;
    at::Tensor x = wideInput(n, 11).mul_(1e-9);  // spreads over 2^-80 .. 2^-10
    x.narrow(0, 0, 200).mul_(1e14);              // some above 2^10 (clipped)
    x[5] = 0.0f;
    x[6] = -0.0f;
    // Gradient-like magnitudes (2^-49 .. 2^10 after rounding): whole steps of
    // the AVX-512 encoder's fast path and of the AVX2 encoder's common case
    // (nothing below 2^-50), then one step with a zero (their exact paths).
    at::Tensor typical = at::randn({n}, at::make_generator<at::CPUGeneratorImpl>(12)).mul_(1e-3);
    typical[1000] = 0.0f;
    for (const at::Tensor& in : {x, typical})
    for (const char* opts : {"{deterministic: false}", "{deterministic: true}"}) {
      auto c = makeCompressor("cnat", opts);
      Payload p = c->encode(in, ctx);
      const bool stochastic = std::string(opts).find("false") != std::string::npos;
      const uint8_t* codes = p.tensors[0].data_ptr<uint8_t>();
      const float* xs = in.data_ptr<float>();
      int64_t mismatches = 0;
      for (int64_t i = 0; i < n; ++i)
        mismatches += codes[i] != naturalEncode(xs[i], naturalNoise(ctx.privateSeed(), i), stochastic);
      EXPECT_EQ(mismatches, 0) << opts;
      at::Tensor y = c->decode(p, n, ctx);
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += y[i].item<float>() != naturalDecode(codes[i]);
      EXPECT_EQ(wrong, 0) << opts;
    }
  });
}

// Every one of the 256 byte values decodes as naturalDecode (the table-driven
// AVX-512 decoder included: 4 x 64 codes, then a scalar tail).
TEST(SimdKernels, NaturalDecodeOfEveryByte) {
  testing::forEachSimdLevel([&] {
    comm::LocalCommunicator local;
    Context ctx = testing::contextFor(local);
    auto c = makeCompressor("cnat", "{}");
    const int64_t n = 256 + 7;
    Payload p;
    p.tensors.push_back(at::empty({n}, at::kByte));
    for (int64_t i = 0; i < n; ++i) p.tensors[0].data_ptr<uint8_t>()[i] = static_cast<uint8_t>(i % 256);
    const at::Tensor y = c->decode(p, n, ctx);
    for (int64_t i = 0; i < n; ++i) {
      const float want = naturalDecode(static_cast<uint8_t>(i % 256)), got = y[i].item<float>();
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "code " << i % 256;
    }
  });
}

}  // namespace
}  // namespace gradzip::compress
