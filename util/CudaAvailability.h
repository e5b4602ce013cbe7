// Whether this process can run CUDA work, and if not, why: the one check
// behind `run.device: cuda` (trainer/Device.h), `bench compressors --device
// cuda` (experiments/BenchDevice.h) and the GPU tests' skips. It asks
// LibTorch's CUDA hooks, which exist only where the program loads
// libtorch_cuda (a gradzip built with GRADZIP_CUDA), so it needs no CUDA
// headers.
#pragma once

#include <string>

namespace gradzip {

// "" when CUDA can run here; otherwise the cause, as a clause to follow
// "..., but ": "this gradzip was built without CUDA (...)" or "no GPU is
// visible to this process (CUDA_VISIBLE_DEVICES=...)".
std::string whyNoCuda();

}  // namespace gradzip
