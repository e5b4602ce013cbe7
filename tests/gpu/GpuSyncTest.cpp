// Gradient sync of CUDA parameters (sync/GradSync.h): buckets on the GPU,
// compressed on the comm thread's own stream (sync/CommStream.h) while
// backward runs, give two ranks sharing the GPU the gradients of the union
// batch; and a compressor's phases are timed on the device
// (compress/DevicePhaseClock.h). Skipped, saying why, without a GPU.
#include "compress/Compressor.h"
#include "compress/DevicePhaseClock.h"
#include "sync/GradSync.h"
#include "tests/gpu/GpuTesting.h"
#include "tests/testing/ThreadGroup.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>

namespace gradzip {
namespace {

const torch::Device kGpu(torch::kCUDA, 0);

// A two-layer MLP's parameters on the GPU, the same on every rank.
std::vector<std::pair<std::string, torch::Tensor>> mlp() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  std::vector<std::pair<std::string, torch::Tensor>> p;
  for (auto [name, rows, cols] : {std::tuple{"w1", 64, 32}, {"w2", 10, 64}})
    p.emplace_back(name, at::randn({rows, cols}, gen).div_(8).to(kGpu).requires_grad_());
  return p;
}

torch::Tensor loss(const std::vector<std::pair<std::string, torch::Tensor>>& p, const torch::Tensor& x,
                   const torch::Tensor& y) {
  return torch::nn::functional::cross_entropy(torch::relu(x.matmul(p[0].second.t())).matmul(p[1].second.t()), y);
}

TEST(GpuSync, TwoRanksOnOneGpuGetTheUnionBatchGradients) {
  GZ_NEED_GPU();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
  const torch::Tensor x = at::randn({8, 32}, gen).to(kGpu), y = at::randint(0, 10, {8}, gen).to(kGpu);
  auto ref = mlp();
  loss(ref, x, y).backward();
  testing::runRanks(2, [&](comm::Communicator& c) {
    auto params = mlp();
    trainer::GradSyncOptions o;
    o.bucketBytes = 4096;  // several buckets, handed over while backward runs
    trainer::Plan plan;
    plan.compressor = "fp32";
    plan.collective = "ring";
    trainer::GradSync sync(params, c, o, plan);
    const auto mine = torch::arange(c.rank() * 4, c.rank() * 4 + 4, torch::TensorOptions(kGpu).dtype(torch::kLong));
    sync.beginStep(0);
    loss(params, x.index({mine}), y.index({mine})).backward();
    sync.finishStep();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(params[i].second.grad().is_cuda());
      EXPECT_TRUE(torch::allclose(params[i].second.grad().cpu(), ref[i].second.grad().cpu(), 1e-5, 1e-6))
          << params[i].first;
    }
  }, std::chrono::seconds(60), /*stageCuda=*/true);
}

TEST(GpuSync, PhasesAreTimedOnTheDevice) {
  GZ_NEED_GPU();
  compress::PhaseTimes times;
  compress::DevicePhaseClock clock(kGpu);
  times.deviceClock = &clock;
  const torch::Tensor a = torch::randn({4096, 4096}, torch::TensorOptions(kGpu));
  torch::cuda::synchronize();
  const auto start = std::chrono::steady_clock::now();
  double launch;  // host seconds of the scope: the launches alone
  {
    compress::ScopedPhase s(&times, &compress::PhaseTimes::encode);
    for (int i = 0; i < 8; ++i) a.matmul(a);  // queued; the host returns at once
    launch = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  torch::cuda::synchronize();
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  clock.addTo(times);
  // The device's time, not the host's: it accounts for most of the wall time
  // up to the synchronisation, and 8 products of 2·4096³ flops take far
  // longer than their launches (checked, so the comparison means something).
  ASSERT_GT(total, 5 * launch) << "the products ran no longer than their launches";
  EXPECT_GT(times.encode, 0.5 * total) << "host launch " << launch << " s, wall " << total << " s";
  EXPECT_LE(times.encode, total);
  EXPECT_EQ(times.decode, 0.0);
}

}  // namespace
}  // namespace gradzip
