// Implements trainer/Device.h.
#include "trainer/Device.h"

#include "util/Error.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstdlib>

namespace gradzip::trainer {

torch::Device resolveDevice(const std::string& name, int localRank, bool shareGpus) {
  if (name == "cpu") return torch::Device(torch::kCPU);
  GZ_CHECK(name == "cuda", "run.device: unknown device '{}' (valid: cpu, cuda)", name);
  // isBuilt: the CUDA libraries are loaded into this process (a CUDA build);
  // hasCUDA: they also found a driver and at least one device.
  if (!at::detail::getCUDAHooks().isBuilt())
    throw UserError("run.device: cuda, but this gradzip was built without CUDA (configure with GRADZIP_CUDA=ON on "
                    "a machine with the CUDA toolkit), or this program does not load gradzip's CUDA path");
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string visibleText = visible ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible) : "";
  if (!at::globalContext().hasCUDA())
    throw UserError(fmt::format("run.device: cuda, but no GPU is visible to this process{}", visibleText));
  const int count = at::detail::getCUDAHooks().getNumGPUs();
  if (shareGpus && count > 0 && localRank >= 0) localRank %= count;
  GZ_CHECK(localRank >= 0 && localRank < count,
           "run.device: cuda: LOCAL_RANK {} has no GPU: {} visible{}; start at most {} ranks per machine, or give "
           "two ranks one GPU with `comm.cuda_backend: gloo` and CUDA_VISIBLE_DEVICES",
           localRank, count, visibleText, count);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(localRank));
}

data::Batch onDevice(data::Batch batch, const torch::Device& device) {
  if (device.is_cpu()) return batch;
  auto move = [&](const at::Tensor& t) {
    return t.defined() ? t.pin_memory().to(device, /*non_blocking=*/true) : t;
  };
  return data::Batch{move(batch.input), move(batch.target)};
}

}  // namespace gradzip::trainer
