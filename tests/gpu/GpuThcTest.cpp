// THC and its randomized Hadamard transform on CUDA tensors: the rotation
// gives the CPU kernels' bits, and THC's generic path on the GPU encodes,
// decodes and aggregates as on the CPU (compress/ThcGeneric.cpp). Skipped,
// saying why, without a GPU.
#include "comm/LocalCommunicator.h"
#include "compress/Thc.h"
#include "compress/kernels/Hadamard.h"
#include "compress/kernels/HadamardGeneric.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/gpu/GpuTesting.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace gradzip::compress {
namespace {

// The GPU computes the same rotation: the butterflies are single IEEE adds
// and subtracts, the signs exact products and the scale one float product,
// none of which a device rounds differently. Skipped without a GPU.
TEST(HadamardGeneric, CudaRotationEqualsTheCpuBitForBit) {
  GZ_NEED_GPU();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  for (int64_t d : {5, 1000, 70000})
    for (int blockLog2 : {0, 8}) {
      SCOPED_TRACE(::testing::Message() << "d " << d << " block log2 " << blockLog2);
      RandomizedHadamard rht(d, blockLog2);
      const at::Tensor x = at::randn({d}, gen);
      const at::Tensor r = generic::rhtForward(rht, x.to(at::kCUDA), 9);
      EXPECT_TRUE(r.is_cuda());
      EXPECT_TRUE(testing::bitEqual(r.cpu(), rht.forward(x, 9)));
      const at::Tensor y = at::randn({rht.paddedDim()}, gen);
      EXPECT_TRUE(testing::bitEqual(generic::rhtInverse(rht, y.to(at::kCUDA), 9).cpu(), rht.inverse(y, 9)));
    }
}

// The generic path on a CUDA tensor computes what it computes on the CPU
// and stays on the device: the same payload bits wherever the block ranges
// round alike (always with range: max), decodes and single-rank aggregates
// equal to float rounding. Skipped without a GPU.
TEST(Thc, GenericPathOnCudaMatchesTheCpu) {
  GZ_NEED_GPU();
  comm::LocalCommunicator local;
  std::vector<ThcOptions> cases(4);
  cases[1].variant = "uniform";
  cases[2].deployment = cases[3].deployment = "allreduce";
  cases[2].rotationBlockLog2 = cases[3].rotationBlockLog2 = 9;
  cases[3].range = "max";
  for (const auto& o : cases)
    for (int64_t d : {10, 3000}) {
      SCOPED_TRACE(o.deployment + " " + o.variant + " " + o.range + " d " + std::to_string(d));
      Thc thc(o);
      thc.setCodecPath(CodecPath::Generic);
      Context ctx = testing::contextFor(local);
      ctx.seed = 3;
      ctx.step = d;
      const at::Tensor x = at::randn({d}, at::make_generator<at::CPUGeneratorImpl>(d));
      const at::Tensor xg = x.to(at::kCUDA);
      const Payload pc = thc.encode(x, ctx), pg = thc.encode(xg, ctx);
      ASSERT_EQ(pg.tensors.size(), 2u);
      EXPECT_TRUE(pg.tensors[1].is_cuda());
      EXPECT_TRUE(at::allclose(pc.tensors[0], pg.tensors[0].cpu(), 1e-6, 0));
      const bool sameRanges = testing::bitEqual(pc.tensors[0], pg.tensors[0].cpu());
      if (sameRanges) {
        EXPECT_TRUE(testing::bitEqual(pc.tensors[1], pg.tensors[1].cpu()));
      }
      if (o.range == "max") {
        EXPECT_TRUE(sameRanges);
      }
      const at::Tensor yg = thc.decode(pg, d, ctx);
      EXPECT_TRUE(yg.is_cuda());
      // Ranges one ulp apart may move a code (a step over sqrt(B), under 1%).
      const double tol = (sameRanges ? 1e-6 : 1e-2) * x.abs().max().item<double>();
      EXPECT_TRUE(at::allclose(yg.cpu(), thc.decode(pc, d, ctx), 1e-5, tol));
      const Aggregated ag = thc.aggregate(xg, ctx), ac = thc.aggregate(x, ctx);
      EXPECT_TRUE(ag.mean.is_cuda() && ag.localApplied.is_cuda());
      EXPECT_TRUE(at::allclose(ag.mean.cpu(), ac.mean, 1e-5, tol));
    }
}

}  // namespace
}  // namespace gradzip::compress
