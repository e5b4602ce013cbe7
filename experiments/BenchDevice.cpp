// Implements experiments/BenchDevice.h with util/CudaAvailability.h and
// torch::cuda::synchronize (in LibTorch's CPU library).
#include "experiments/BenchDevice.h"

#include "util/CudaAvailability.h"
#include "util/Error.h"

#include <torch/cuda.h>

#include <chrono>

namespace gradzip::experiments {

at::Device benchDevice(const std::string& name, const std::string& who) {
  if (name == "cpu") return at::Device(at::kCPU);
  GZ_CHECK(name == "cuda", "{}: unknown device '{}' (known: cpu, cuda)", who, name);
  const std::string why = whyNoCuda();
  GZ_CHECK(why.empty(), "{}: --device cuda needs a GPU, but {}", who, why);
  return at::Device(at::kCUDA, 0);
}

void syncDevice(const at::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

DeviceCopyProbe::DeviceCopyProbe(int64_t bytes, const at::Device& device)
    : device_(device), src_(at::ones({bytes}, at::TensorOptions(at::kByte).device(device))),
      dst_(at::empty({bytes}, at::TensorOptions(at::kByte).device(device))) {
  dst_.copy_(src_);  // warm-up: allocation and the first launch stay out of the timings
  syncDevice(device_);
}

double DeviceCopyProbe::copy() {
  dst_.copy_(src_);  // re-warms what the codec evicted
  syncDevice(device_);
  const auto a = std::chrono::steady_clock::now();
  dst_.copy_(src_);
  syncDevice(device_);
  const auto b = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace gradzip::experiments
