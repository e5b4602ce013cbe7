// Communication of CUDA tensors (comm/ProcessGroupCommunicator.h): two ranks
// that share one GPU over Gloo with host staging (`comm.cuda_backend: gloo`;
// NCCL refuses two ranks on one device), running the engine collectives,
// point-to-point messages and compressors whose collectives are gradzip's
// own; a one-rank NCCL group; and the error when a CUDA tensor meets a
// communicator that has neither.
#include "comm/Collective.h"
#include "comm/NcclBackend.h"
#include "comm/ProcessGroupCommunicator.h"
#include "compress/Factory.h"
#include "tests/gpu/GpuTesting.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace gradzip::comm {
namespace {

const at::Device kGpu(at::kCUDA, 0);

at::Tensor gaussian(int64_t d, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn({d}, gen, at::kFloat);
}

TEST(GpuComm, TwoRanksShareOneGpuOverGloo) {
  GZ_NEED_GPU();
  testing::runRanks(2, [](Communicator& c) {
    const float me = static_cast<float>(c.rank() + 1);
    at::Tensor t = at::full({1000}, me, at::TensorOptions(kGpu));
    c.allReduce(t).wait();
    EXPECT_TRUE(t.is_cuda());
    EXPECT_TRUE(at::equal(t.cpu(), at::full({1000}, 3.0f)));

    std::vector<at::Tensor> all = {at::empty({3}, kGpu), at::empty({3}, kGpu)};
    c.allGather(all, at::full({3}, me, at::TensorOptions(kGpu))).wait();
    EXPECT_EQ(all[0].cpu()[0].item<float>(), 1.0f);
    EXPECT_EQ(all[1].cpu()[0].item<float>(), 2.0f);

    at::Tensor b = at::full({4}, me, at::TensorOptions(kGpu));
    c.broadcast(b, 1).wait();
    EXPECT_EQ(b.cpu()[3].item<float>(), 2.0f);

    const int peer = 1 - c.rank();
    at::Tensor in = at::empty({7}, kGpu);
    Work r = c.recv(in, peer, 5);
    Work s = c.send(at::full({7}, me, at::TensorOptions(kGpu)), peer, 5);
    s.wait();
    r.wait();
    EXPECT_EQ(in.cpu()[6].item<float>(), static_cast<float>(peer + 1));
  }, std::chrono::seconds(30), /*stageCuda=*/true);
}

TEST(GpuComm, CompressorsAggregateCudaGradientsOverGradzipsCollectives) {
  GZ_NEED_GPU();
  const int64_t d = 20011;
  const at::Tensor truth = (gaussian(d, 10) + gaussian(d, 11)) / 2;
  for (const auto& [name, collective] : std::vector<std::pair<std::string, std::string>>{
           {"fp16", "ring"}, {"topkc", "tree"}, {"thc", "ps"}, {"cnat", "ps"}, {"powersgd", "ring"}}) {
    SCOPED_TRACE(name + "@" + collective);
    // The same aggregate with CPU tensors on the same (generic) path: the reference accuracy.
    std::vector<at::Tensor> means(2), cpuMeans(2);
    testing::runRanks(2, [&](Communicator& c) {
      for (const bool gpu : {true, false}) {
        auto compressor = compress::makeCompressor(name, "error_feedback: false\ncodec: generic");
        auto coll = makeCollective(collective, c);
        compress::Context ctx{c};
        ctx.collective = coll.get();
        ctx.collectiveName = collective;
        ctx.seed = 3;
        const at::Tensor x = gaussian(d, 10 + c.rank());
        compress::Aggregated a = compressor->aggregate(gpu ? x.to(kGpu) : x, ctx);
        EXPECT_EQ(a.mean.is_cuda(), gpu);
        (gpu ? means : cpuMeans)[c.rank()] = a.mean.cpu();
      }
    }, std::chrono::seconds(60), /*stageCuda=*/true);
    // The mean is bit-identical on every rank (compress/Compressor.h), and as
    // accurate as the CPU's: the same noise, but reductions may round
    // differently on the GPU, so the check is on vNMSE.
    EXPECT_TRUE(at::equal(means[0], means[1]));
    auto vnmse = [&](const at::Tensor& m) {
      return (m - truth).pow(2).sum().item<double>() / truth.pow(2).sum().item<double>();
    };
    EXPECT_LE(vnmse(means[0]), 1.5 * vnmse(cpuMeans[0]) + 1e-6) << "CPU vNMSE " << vnmse(cpuMeans[0]);
  }
}

TEST(GpuComm, OneRankNcclGroupAllReducesInPlace) {
  GZ_NEED_GPU();
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::chrono::milliseconds timeout(30000);
  auto nccl = makeNcclBackend(c10::make_intrusive<c10d::PrefixStore>("nccl", store), 0, 1, timeout);
  ASSERT_TRUE(nccl);
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>("gloo", store), 0,
                                                         1, opts);
  ProcessGroupCommunicator c(gloo, nccl, 0, 1, timeout);
  EXPECT_EQ(c.backendName(), "gloo+nccl");
  const at::Tensor x = gaussian(1 << 20, 4);
  at::Tensor t = x.to(kGpu);
  c.allReduce(t, ReduceOp::Sum).wait();
  EXPECT_TRUE(at::equal(t.cpu(), x));
}

TEST(GpuComm, CudaTensorWithoutNcclOrStagingNamesBothWays) {
  GZ_NEED_GPU();
  try {
    testing::runRanks(2, [](Communicator& c) {
      at::Tensor t = at::ones({4}, at::TensorOptions(kGpu));
      c.allReduce(t).wait();
    });
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA tensor given but this communicator has no NCCL backend"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("comm.cuda_backend: gloo"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gradzip::comm
