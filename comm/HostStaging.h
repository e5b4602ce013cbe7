// Host staging of CUDA tensors for a CPU backend: the way two ranks that share
// one GPU communicate (NCCL refuses two ranks on one device), selected
// explicitly with `comm.cuda_backend: gloo`. A CUDA tensor is copied to host
// memory, the operation runs on the copy over Gloo, and when the returned Work
// is waited for (or first reports completion) the results are copied back into
// the caller's device tensors. Costs a device-host round trip per message;
// NCCL (`comm.cuda_backend: nccl`) has none.
#pragma once

#include "comm/Communicator.h"

#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace gradzip::comm {

// A host copy of t (t itself when it is already on the CPU).
at::Tensor hostCopy(const at::Tensor& t);

// Wraps `inner`: waiting for it also copies each pair's host tensor into its
// device tensor (device.copy_(host)), once, after `inner` finished. A failed
// `inner` rethrows and copies nothing.
Work withCopyBack(Work inner, std::vector<std::pair<at::Tensor, at::Tensor>> deviceFromHost);

}  // namespace gradzip::comm
