// The NCCL backend for CUDA tensors (compiled only with GRADZIP_CUDA): creates a
// c10d ProcessGroupNCCL when a GPU is visible, else returns null so the
// communicator serves CPU tensors through Gloo alone.
#include "comm/NcclBackend.h"

#include "comm/Rendezvous.h"

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/cuda.h>

#include <spdlog/spdlog.h>

namespace gradzip::comm {

c10::intrusive_ptr<c10d::Backend> makeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout) {
  if (!torch::cuda::is_available()) {
    spdlog::debug("no GPU visible; NCCL backend not created");
    return {};
  }
  auto opts = c10::make_intrusive<c10d::ProcessGroupNCCL::Options>();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
}

void registerNcclBackend() { setCudaBackendFactory(&makeNcclBackend); }

}  // namespace gradzip::comm
