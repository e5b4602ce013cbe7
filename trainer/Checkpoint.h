// Checkpoint files of a run directory, written atomically and verified on load.
// The newest is `checkpoint.pt`, the one before it `checkpoint.prev.pt`; each
// has a sidecar `.sum` with its size and FNV-1a hash. A truncated or corrupt
// newest file is detected and the previous good one is used, with a warning.
// Contents are whatever the caller writes into the torch archive (model,
// optimizer, sampler, RNG, compressor state, clock).
#pragma once

#include <torch/serialize/archive.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gradzip::trainer {

// Writes dir/checkpoint.pt atomically (temp file, fsync, rename), keeping the
// previous one as checkpoint.prev.pt. `step` goes into the sidecar, so ranks
// can agree on a checkpoint without loading the archives.
void writeCheckpoint(const std::string& dir, int64_t step,
                     const std::function<void(torch::serialize::OutputArchive&)>& fill);

struct CheckpointFile {
  std::string path;
  int64_t step = 0;
};

// The checkpoint files of `dir` whose size and hash match their sidecar, newest
// first; a truncated or corrupt one is skipped with a warning. Empty when the
// directory holds none; throws UserError when checkpoints exist but none is valid.
std::vector<CheckpointFile> validCheckpoints(const std::string& dir);

// Loads one checkpoint file into `use`; false (with a warning) when the archive
// cannot be read. UserErrors thrown by `use` propagate.
bool loadCheckpointFile(const std::string& path, const std::function<void(torch::serialize::InputArchive&)>& use);

// Reads the newest readable valid checkpoint into `use`; returns its path, or ""
// when the directory holds none. Throws UserError when checkpoints exist but none
// is valid.
std::string readCheckpoint(const std::string& dir, const std::function<void(torch::serialize::InputArchive&)>& use);

// Writes named tensors as a dict that Python's torch.load reads
// (torch::pickle_save format): {name: tensor}. The file carries a TorchScript
// type tag, so load it with torch.load(path, weights_only=False).
void exportStateDict(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

// Helpers for scalars in archives.
void writeScalar(torch::serialize::OutputArchive& ar, const std::string& key, double v);
double readScalar(torch::serialize::InputArchive& ar, const std::string& key);

}  // namespace gradzip::trainer
