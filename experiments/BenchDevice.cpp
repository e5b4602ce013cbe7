// Implements experiments/BenchDevice.h with at::detail::getCUDAHooks() and
// torch::cuda::synchronize, both in LibTorch's CPU library.
#include "experiments/BenchDevice.h"

#include "util/Error.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstdlib>

namespace gradzip::experiments {

std::string whyNoCuda() {
  if (!at::detail::getCUDAHooks().isBuilt())
    return "this gradzip binary has no CUDA support loaded (LibTorch's CUDA library libtorch_cuda.so is not linked: "
           "build gradzip with GRADZIP_CUDA=ON against a CUDA build of torch)";
  if (!at::globalContext().hasCUDA()) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return std::string("no CUDA GPU is visible (at::globalContext().hasCUDA() is false: no GPU or no driver") +
           (visible ? std::string(", CUDA_VISIBLE_DEVICES=") + visible : std::string()) + ")";
  }
  return "";
}

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
