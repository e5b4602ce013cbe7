// Tests compress/kernels/ThcKernels.h and ThcTableKernels.h, THC's fused
// codecs (and through them the AVX-512 block kernels of ThcBlock512.h), against
// THC's step-by-step pipeline, bit for bit on every SIMD tier: the all-reduce
// form's and the ps form's encode/decode through compress/Thc, and the ps
// owner's sums decoded by absolute coordinate. The suite stays `Thc` (the
// codec under test is Thc's).
#include "compress/kernels/ThcKernels.h"

#include "comm/LocalCommunicator.h"
#include "compress/Thc.h"
#include "compress/ThcTable.h"
#include "compress/kernels/BitPack.h"
#include "compress/kernels/Hadamard.h"
#include "compress/kernels/SaturatingPackedSum.h"
#include "compress/kernels/StochasticQuantize.h"
#include "compress/kernels/ThcTableKernels.h"
#include "tests/compress/kernels/SimdLevels.h"

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>

namespace gradzip::compress {
namespace {

// The fused all-reduce codec (compress/kernels/ThcKernels.h) computes exactly the
// step-by-step pipeline: block norms in double, M = t_p·l/√B (THC Alg. 3),
// R = RandomizedHadamard::forward, y = clamp(R·(L/M), −L, L), uniform SQ
// (quantizeUniform, the same noise stream), SaturatingPackedSum words; and
// decode = forward's inverse of (s/1)·(M/L). Compared bit for bit, for field
// widths on the byte path (4, 8) and the int32 path (5), with padding, a block
// of zeros (M = 0), and for blocks of 2^3 (the scalar loop), 2^7 (portable
// loops) and 2^8, 2^9, 2^10, 2^12 (AVX-512 kernels where the CPU has them: 1,
// 2, 4 and 16 register columns).
TEST(Thc, FusedAllReduceCodecEqualsTheStepByStepPipeline) {
  testing::forEachSimdLevel([&] {
    comm::LocalCommunicator local;
    Context ctx{local};
    ctx.seed = 5;
    ctx.step = 3;
    const int64_t d = 5003;  // e.g. blocks of 512: 10 blocks, the last one padded (and not a multiple of 8)
    at::Tensor x = at::randn({d}, at::make_generator<at::CPUGeneratorImpl>(8)).mul_(1e-3);
    x.narrow(0, 0, 1024).zero_();  // whole zero blocks up to 2^10
    for (int blockLog2 : {3, 7, 8, 9, 10, 12})
    for (int agg : {0, 8, 5}) {
      SCOPED_TRACE(blockLog2);
      ThcOptions o;
      o.deployment = "allreduce";
      o.rotationBlockLog2 = blockLog2;
      o.aggregationBits = agg;
      Thc thc(o);
      Payload p = thc.encode(x, ctx);
      RandomizedHadamard rht(d, blockLog2);
      const int64_t B = rht.blockSize(), dp = rht.paddedDim();
      at::Tensor padded = at::zeros({dp});
      padded.narrow(0, 0, d).copy_(x);
      const at::Tensor norms = padded.view({rht.numBlocks(), B}).to(at::kDouble).norm(2, {1}).to(at::kFloat);
      EXPECT_TRUE(at::equal(p.tensors[0], norms)) << agg;
      const at::Tensor range =
          (norms.to(at::kDouble) * (thcTruncation(o.p) / std::sqrt(double(B)))).to(at::kFloat).contiguous();
      const at::Tensor R = rht.forward(x, ctx.sharedSeed());
      const float L = 7;
      at::Tensor y = at::empty({dp});
      for (int64_t i = 0; i < dp; ++i) {
        const float m = range[i / B].item<float>();
        y[i] = m > 0 ? std::min(std::max(R[i].item<float>() * (L / m), -L), L) : 0.0f;
      }
      at::Tensor codes = at::empty({dp}, at::kInt);
      quantizeUniform(y.data_ptr<float>(), dp, ctx.privateSeed(), 0, codes.data_ptr<int32_t>());
      const int field = agg > 0 ? agg : 4;
      EXPECT_TRUE(at::equal(p.tensors[1], SaturatingPackedSum::pack(codes, field))) << agg;
      const at::Tensor s = SaturatingPackedSum::unpack(p.tensors[1], field, dp);
      at::Tensor deq = at::empty({dp});
      for (int64_t i = 0; i < dp; ++i)
        deq[i] = (static_cast<float>(s[i].item<int32_t>()) / 1.0f) * (range[i / B].item<float>() / L);
      const at::Tensor expect = rht.inverse(deq, ctx.sharedSeed());
      const at::Tensor got = thc.decode(p, d, ctx);
      EXPECT_TRUE(at::equal(got, expect)) << agg << " max diff " << (got - expect).abs().max().item<float>();
    }
  });
}

// The ps deployment's fused codec (compress/kernels/ThcTableKernels.h) against THC
// Alg. 2 step by step: R = RHT(x) (RandomizedHadamard::forward, the
// orthonormal scale included), the grid values y, TableQuantizer's SQ,
// packBits; then X = fma(T[z], 2M/g, −M) and RHT⁻¹. Bit for bit, on every
// SIMD tier, for tables of 4 and 16 entries with g <= 32 (the AVX-512 tier's
// register permutes), g = 60 and 256-entry tables (the compiler's loop),
// uniform tables, full and partial rotation, and all-zero blocks (M = 0:
// y = g/2).
TEST(Thc, ParameterServerCodecEqualsTheStepByStepPipeline) {
  testing::forEachSimdLevel([&] {
    comm::LocalCommunicator local;
    Context ctx{local};
    ctx.seed = 9;
    ctx.step = 4;
    const int64_t d = 5003;
    at::Tensor x = at::randn({d}, at::make_generator<at::CPUGeneratorImpl>(3)).exp_();
    x.narrow(0, 0, 600).zero_();  // one whole zero block of 2^9
    struct Case { int bits, granularity; const char* variant; int blockLog2; };
    for (const Case& c : {Case{4, 30, "table", 0}, Case{2, 30, "table", 0}, Case{4, 60, "table", 9},
                          Case{8, 255, "table", 0}, Case{4, 15, "uniform", 9}, Case{3, 30, "table", 9}}) {
      SCOPED_TRACE(std::to_string(c.bits) + " bits, g " + std::to_string(c.granularity) + ", " + c.variant +
                   ", blocks 2^" + std::to_string(c.blockLog2));
      ThcOptions o;
      o.bits = c.bits;
      o.granularity = c.granularity;
      o.variant = c.variant;
      o.rotationBlockLog2 = c.blockLog2;
      Thc thc(o);
      const Payload p = thc.encode(x, ctx);
      RandomizedHadamard rht(d, c.blockLog2);
      const int64_t B = rht.blockSize(), dp = rht.paddedDim();
      const at::Tensor range = (p.tensors[0].to(at::kDouble) * (thcTruncation(o.p) / std::sqrt(double(B))))
                                   .to(at::kFloat)
                                   .contiguous();
      const auto& T = std::string(c.variant) == "uniform"
                          ? uniformThcTable(c.bits, o.p).values
                          : cachedThcTable(c.bits, c.granularity, o.p, true).values;
      const float g = static_cast<float>(T.back());
      const at::Tensor R = rht.forward(x, ctx.sharedSeed());
      const float* r = R.data_ptr<float>();
      std::vector<float> y(dp);
      for (int64_t i = 0; i < dp; ++i) {
        const float M = range[i / B].item<float>();
        y[i] = 0.5f * g;
        if (M > 0) y[i] = std::min(std::max((std::min(std::max(r[i], -M), M) + M) * (g / (2 * M)), 0.0f), g);
      }
      at::Tensor z = at::empty({dp}, at::kByte);
      TableQuantizer(T).quantize(y.data(), dp, ctx.privateSeed(), 0, z.data_ptr<uint8_t>());
      EXPECT_TRUE(at::equal(p.tensors[1], packBits(z, c.bits)));
      at::Tensor X = at::empty({dp});
      for (int64_t i = 0; i < dp; ++i) {
        const float M = range[i / B].item<float>();
        X[i] = std::fma(static_cast<float>(T[z[i].item<uint8_t>()]), 2 * M / g, -M);
      }
      const at::Tensor expect = rht.inverse(X, ctx.sharedSeed());
      const at::Tensor got = thc.decode(p, d, ctx);
      EXPECT_TRUE(at::equal(got, expect)) << "max diff " << (got - expect).abs().max().item<float>();
    }
  });
}

// The owner's sums come back in w-bit fields per shard: dequantizeSums
// decodes a shard that starts inside the vector (its blocks' ranges by
// absolute coordinate) to fma(s/n, 2M/g, −M).
TEST(Thc, ParameterServerSumsDecodeByAbsoluteCoordinate) {
  const int n = 3, g = 30, w = 7;  // sums in [0, 90]
  const int64_t B = 512, first = 1024 + 8 * 37, count = 8 * 300;
  const std::vector<float> range = {0.5f, 1.25f, 3.0f, 0.0f, 2.0f};
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
  const at::Tensor s = at::randint(0, n * g + 1, {count}, gen, at::kInt);
  const at::Tensor packed = packBits(s, w);
  std::vector<float> out(count);
  thc::dequantizeSums(packed.data_ptr<uint8_t>(), w, first, count, B, range.data(), n, g, out.data());
  for (int64_t k = 0; k < count; ++k) {
    const float M = range[(first + k) / B];
    ASSERT_EQ(out[k], std::fma(static_cast<float>(s[k].item<int32_t>()) / n, 2 * M / g, -M)) << k;
  }
}

}  // namespace
}  // namespace gradzip::compress
