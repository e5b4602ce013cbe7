// The optional NCCL backend for CUDA tensors, compiled into gradzip_comm_nccl
// only with GRADZIP_CUDA. Executables that want it call registerNcclBackend()
// once before connect(); without it CUDA tensors are refused with a clear error.
// Kept out of gradzip_comm so CPU-only binaries (all tests) never load
// libtorch_cuda.
#pragma once

namespace gradzip::comm {

// Makes connect() create a ProcessGroupNCCL next to Gloo when a GPU is visible.
void registerNcclBackend();

}  // namespace gradzip::comm
