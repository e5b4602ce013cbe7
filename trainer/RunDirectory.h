// The run directory of `gradzip train` (run.out_dir/run.name) before training
// starts. A run's results live there: config.yaml, environment.json,
// tta.jsonl/csv, model.pt, decisions.jsonl, and one rank<r>/ per rank with its
// checkpoints and plan logs. Starting afresh over an earlier run's results
// would mix the two (the ranks' old checkpoints beside new ones, so a later
// --resume finds no common step), so a fresh start refuses unless the user
// resumes, overwrites, or picks another name. Every rank takes the same
// decision after rendezvous, and a directory that cannot be written is
// reported naming run.out_dir, the path and the reason.
#pragma once

#include "comm/Communicator.h"
#include "trainer/TrainConfig.h"

#include <string>
#include <vector>

namespace gradzip::trainer {

// How `gradzip train` was asked to treat an existing run directory.
enum class RunStart {
  Fresh,      // refuse when an earlier run's results are there
  Resume,     // continue from them (--resume)
  Overwrite,  // delete them first (--overwrite)
};

// The earlier-run results that rank `rank` sees in `dir` (names relative to
// dir): rank 0 the run's shared files and every non-empty rank<r>/, another
// rank only its own non-empty rank<r>/. Empty when there are none.
std::vector<std::string> earlierResults(const std::string& dir, int rank);

// A collective on every rank of `comm`, before the Trainer writes anything.
// Creates cfg.runDir() and this rank's rank<r>/ and checks it can write there;
// throws on every rank when any rank cannot (naming run.out_dir, the path
// and, on that rank, the reason), or when `start` is Fresh and any rank finds
// an earlier run's results (naming them and the three ways on): UserError on
// the rank at fault (the lowest one that found results), CommError naming it
// on the others, so a launcher reports the cause and not an echo. With
// Overwrite, removes those results: each rank its rank<r>/, rank 0 the shared
// files and the rank<r>/ of ranks beyond the world size.
void prepareRunDirectory(const TrainConfig& cfg, comm::Communicator& comm, RunStart start);

}  // namespace gradzip::trainer
