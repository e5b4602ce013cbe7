// Where `gradzip bench compressors` runs its timed work: the CPU, or the first
// CUDA device through LibTorch's device-generic API. Nothing here needs the
// CUDA headers or libraries: CUDA work goes through the hooks that LibTorch's
// CUDA library registers when the binary loads it, so a build without CUDA
// compiles this and says at run time what is missing. On a GPU a timed region
// is synchronised before and after, so its time covers the kernels and not
// just their launches.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace gradzip::experiments {

// The device named "cpu" or "cuda" (cuda:0). UserError naming `who` and the
// valid names for another name, and for cuda when whyNoCuda() (util/CudaAvailability.h) says why not.
at::Device benchDevice(const std::string& name, const std::string& who);

// Waits until the device has finished its queued work; nothing on the CPU.
void syncDevice(const at::Device& device);

// The GPU's yardstick, as memcpy is the CPU's: a device-to-device copy of
// `bytes` bytes into a preallocated tensor. copy() returns the seconds of the
// second of two back-to-back copies (the first re-warms the L2 cache the
// codec timed in between filled), synchronised before and after.
class DeviceCopyProbe {
 public:
  DeviceCopyProbe(int64_t bytes, const at::Device& device);
  double copy();

 private:
  at::Device device_;
  at::Tensor src_, dst_;
};

}  // namespace gradzip::experiments
