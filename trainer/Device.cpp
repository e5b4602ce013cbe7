// Implements trainer/Device.h.
#include "trainer/Device.h"

#include "util/CudaAvailability.h"
#include "util/Error.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include <cstdlib>

namespace gradzip::trainer {

torch::Device resolveDevice(const std::string& name, int localRank, bool shareGpus) {
  if (name == "cpu") return torch::Device(torch::kCPU);
  GZ_CHECK(name == "cuda", "run.device: unknown device '{}' (valid: cpu, cuda)", name);
  if (const std::string why = whyNoCuda(); !why.empty()) throw UserError("run.device: cuda, but " + why);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string visibleText = visible ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible) : "";
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
