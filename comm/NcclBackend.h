// The optional NCCL backend for CUDA tensors, compiled into gradzip_comm_nccl
// only with GRADZIP_CUDA. Executables that want it call registerNcclBackend()
// once before connect(); without it CUDA tensors are refused with a clear error.
// Kept out of gradzip_comm so CPU-only binaries (all tests) never load
// libtorch_cuda.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace gradzip::comm {

// Makes connect() create a ProcessGroupNCCL next to Gloo when a GPU is visible.
void registerNcclBackend();

// The factory connect() uses: a ProcessGroupNCCL over `store`, or null when
// no GPU is visible.
c10::intrusive_ptr<c10d::Backend> makeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout);

}  // namespace gradzip::comm
