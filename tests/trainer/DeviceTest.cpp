// Tests of trainer/Device and `run.device` as a config meets it: the key's
// valid values, the error for CUDA where this program cannot run it (this
// test program is never linked with the CUDA libraries, like a build without
// GRADZIP_CUDA), and that a CPU batch passes through untouched. The GPU side
// (batches on cuda, training on a GPU) is tests/gpu/ and scripts/gpu_check.sh.
#include "tests/testing/UserErrorOf.h"
#include "tests/testing/ThreadGroup.h"
#include "trainer/Device.h"
#include "trainer/TrainConfig.h"
#include "util/Error.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

using namespace gradzip;
using gradzip::testing::userErrorOf;

TEST(Device, ConfigKeysTakeTheirValuesAndNameTheValidOnes) {
  gradzip::testing::TempDir dir;
  const std::string path = dir.path() + "/c.yaml";
  std::ofstream(path) << "model: {name: mlp}\ndata: {dataset: fashion_mnist}\n";
  auto c = trainer::TrainConfig::load(path);
  EXPECT_EQ(c.run.device, "cpu");
  EXPECT_EQ(c.comm.cudaBackend, "auto");
  c = trainer::TrainConfig::load(path, {"run.device=cuda", "comm.cuda_backend=gloo"});
  EXPECT_EQ(c.run.device, "cuda");
  EXPECT_EQ(c.comm.cudaBackend, "gloo");
  EXPECT_EQ(c.toYaml()["run"]["device"].as<std::string>(), "cuda");
  EXPECT_EQ(c.toYaml()["comm"]["cuda_backend"].as<std::string>(), "gloo");
  const auto gpu = userErrorOf([&] { trainer::TrainConfig::load(path, {"run.device=gpu"}); });
  EXPECT_NE(gpu.find("run.device"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("cpu, cuda"), std::string::npos) << gpu;
  const auto mpi = userErrorOf([&] { trainer::TrainConfig::load(path, {"comm.cuda_backend=mpi"}); });
  EXPECT_NE(mpi.find("comm.cuda_backend"), std::string::npos) << mpi;
  EXPECT_NE(mpi.find("auto, nccl, gloo"), std::string::npos) << mpi;
}

TEST(Device, CudaWithoutTheCudaLibrariesNamesTheBuild) {
  EXPECT_TRUE(trainer::resolveDevice("cpu", 0, false).is_cpu());
  const auto e = userErrorOf([] { trainer::resolveDevice("cuda", 0, false); });
  EXPECT_NE(e.find("run.device: cuda, but this gradzip was built without CUDA"), std::string::npos) << e;
}

TEST(Device, CpuBatchesStayAsTheyAre) {
  data::Batch b{torch::ones({2, 3}), torch::zeros({2}, torch::kLong)};
  const auto moved = trainer::onDevice(b, torch::Device(torch::kCPU));
  EXPECT_TRUE(moved.input.is_same(b.input));
  EXPECT_TRUE(moved.target.is_same(b.target));
}
