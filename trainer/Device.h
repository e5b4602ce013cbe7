// Where a run computes (`run.device`): resolving "cpu" or "cuda" to a torch
// device, with an error that names what is missing, and moving batches there.
// With cuda, rank r uses the GPU its LOCAL_RANK names, as torchrun sets it.
// Ranks may share GPUs only when CUDA tensors travel over Gloo
// (`comm.cuda_backend: gloo`): NCCL refuses two ranks on one device.
#pragma once

#include "data/Dataset.h"

#include <torch/types.h>

#include <string>

namespace gradzip::trainer {

// "cpu" → the CPU. "cuda" → cuda:localRank, or cuda:(localRank mod the GPU
// count) when `shareGpus`. Throws UserError when CUDA cannot run here, naming
// which is missing: a CUDA build of gradzip (the CUDA libraries are linked
// only with GRADZIP_CUDA), a visible GPU, or a GPU for this local rank
// (naming how many are visible and CUDA_VISIBLE_DEVICES).
torch::Device resolveDevice(const std::string& name, int localRank, bool shareGpus);

// The batch on `device`. For a GPU the host tensors go through pinned memory
// with non-blocking copies, so the copy overlaps with work already queued; on
// the CPU it is the batch itself.
data::Batch onDevice(data::Batch batch, const torch::Device& device);

}  // namespace gradzip::trainer
