// Every compressor on CUDA tensors (compress/CodecPath.h: the device-generic
// path), compared with the same path on the CPU: the codecs made of exact
// element-wise steps (fp32, fp16, bf16, TopK) give the same bits; the others
// (reductions, matrix products and RNG-driven rounding, whose order differs on
// a GPU) put the same number of bytes on the wire and are as accurate
// (vNMSE), and the unbiased ones stay unbiased (Monte-Carlo mean over steps).
#include "comm/LocalCommunicator.h"
#include "compress/Factory.h"
#include "tests/gpu/GpuTesting.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <set>

namespace gradzip::compress {
namespace {

at::Tensor gaussian(int64_t d, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn({d}, gen, at::kFloat);
}

double vnmse(const at::Tensor& x, const at::Tensor& y) {
  return (y.cpu() - x.cpu()).pow(2).sum().item<double>() / x.cpu().pow(2).sum().item<double>();
}

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ac = a.cpu().contiguous(), bc = b.cpu().contiguous();
  return ac.sizes() == bc.sizes() && ac.scalar_type() == bc.scalar_type() &&
         std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.numel() * ac.element_size()) == 0;
}

// decode(encode(x)) at `step` on `device`, with the generic path forced.
std::pair<Payload, at::Tensor> roundTrip(Compressor& c, const at::Tensor& x, const at::Device& device, int64_t step) {
  comm::LocalCommunicator local;
  Context ctx{local};
  ctx.step = step;
  ctx.seed = 7;
  Payload p = c.encode(x.to(device), ctx);
  at::Tensor y = c.decode(p, x.numel(), ctx);
  return {std::move(p), std::move(y)};
}

TEST(GpuCodec, EveryCompressorRunsOnCudaAsTheGenericPathDoesOnTheCpu) {
  GZ_NEED_GPU();
  const std::set<std::string> exact = {"fp32", "fp16", "bf16", "topk"};
  const at::Tensor x = gaussian(10007, 3);
  for (const auto& name : compressorNames()) {
    SCOPED_TRACE(name);
    auto onCpu = makeCompressor(name, "codec: generic\nerror_feedback: false");
    auto onGpu = makeCompressor(name, "codec: generic\nerror_feedback: false");
    auto [pc, yc] = roundTrip(*onCpu, x, at::kCPU, 0);
    auto [pg, yg] = roundTrip(*onGpu, x, at::Device(at::kCUDA, 0), 0);
    EXPECT_TRUE(yg.is_cuda()) << "decoded on " << yg.device();
    EXPECT_EQ(pc.bytes(), pg.bytes());
    if (exact.count(name)) {
      ASSERT_EQ(pc.tensors.size(), pg.tensors.size());
      for (size_t i = 0; i < pc.tensors.size(); ++i) EXPECT_TRUE(sameBits(pc.tensors[i], pg.tensors[i])) << "tensor " << i;
      EXPECT_TRUE(sameBits(yc, yg));
    } else {
      EXPECT_TRUE(at::isfinite(yg).all().item<bool>());
      EXPECT_LE(vnmse(x, yg), 1.5 * vnmse(x, yc) + 1e-6) << "CPU vNMSE " << vnmse(x, yc);
    }
  }
}

TEST(GpuCodec, UnbiasedCompressorsStayUnbiasedOnCuda) {
  GZ_NEED_GPU();
  // The mean of K independent decodes has E||mean − x||² = vNMSE·||x||²/K;
  // 3× that bound leaves room for the chi-square spread at this d.
  const int k = 64;
  const at::Tensor x = gaussian(4099, 5);
  for (const auto& name : compressorNames()) {
    auto c = makeCompressor(name, "codec: generic\nerror_feedback: false");
    if (!c->capabilities().unbiased || name == "fp32") continue;
    SCOPED_TRACE(name);
    at::Tensor sum = at::zeros_like(x);
    double single = 0;
    for (int s = 0; s < k; ++s) {
      at::Tensor y = roundTrip(*c, x, at::Device(at::kCUDA, 0), s).second.cpu();
      single += vnmse(x, y) / k;
      sum += y;
    }
    EXPECT_LE(vnmse(x, sum / k), 3.0 * single / k) << "single-draw vNMSE " << single;
  }
}

}  // namespace
}  // namespace gradzip::compress
