// Implements util/CudaAvailability.h.
#include "util/CudaAvailability.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstdlib>

namespace gradzip {

std::string whyNoCuda() {
  // isBuilt: the CUDA libraries are loaded into this process; hasCUDA: they
  // also found a driver and at least one device.
  if (!at::detail::getCUDAHooks().isBuilt())
    return "this gradzip was built without CUDA (configure with GRADZIP_CUDA=ON on a machine with the CUDA "
           "toolkit), or this program does not load gradzip's CUDA path";
  if (!at::globalContext().hasCUDA()) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return std::string("no GPU is visible to this process") +
           (visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : std::string());
  }
  return "";
}

}  // namespace gradzip
