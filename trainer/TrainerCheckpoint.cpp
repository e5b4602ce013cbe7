// Trainer::Impl's checkpoint files (trainer/TrainerImpl.h, format in
// trainer/Checkpoint.h): saving this rank's state with the controller's, and
// resuming, where the ranks first agree on the newest step all of them hold.
#include "trainer/TrainerImpl.h"

#include "trainer/Checkpoint.h"
#include "util/Error.h"

#include <spdlog/spdlog.h>

#include <limits>

namespace gradzip::trainer {

void Trainer::Impl::saveCheckpoint() {
  writeCheckpoint(rankDir(), step, [&](torch::serialize::OutputArchive& ar) {
    writeState(ar);
    if (controller) controller->save(ar);
  });
}

std::string Trainer::Impl::agreeOnCheckpoint() {
  // A rank whose checkpoints are all invalid says so in the exchange (-2)
  // instead of throwing before it: its peers would otherwise fail waiting
  // for it and be reported in its place.
  std::vector<CheckpointFile> mine;
  std::string invalid;
  try {
    mine = validCheckpoints(rankDir());  // newest first
  } catch (const UserError& e) {
    invalid = e.what();
  }
  auto steps = torch::full({2}, invalid.empty() ? -1.0 : -2.0, torch::kDouble);  // at most two valid ones
  for (size_t i = 0; i < mine.size(); ++i) steps[i] = double(mine[i].step);
  std::vector<at::Tensor> all;
  for (int r = 0; r < comm.size(); ++r) all.push_back(torch::empty({2}, torch::kDouble));
  comm.allGather(all, steps).wait();
  for (int r = 0; r < comm.size(); ++r) {
    if (all[r][0].item<double>() != -2.0) continue;
    GZ_CHECK(invalid.empty(), "cannot resume: rank {}: {}; without it the ranks share no checkpoint: rerun "
             "with --overwrite to start afresh", comm.rank(), invalid);
    // Rank r's failure, seen here: a CommError (exit code 3), which
    // `gradzip launch` reports as following from rank r's own.
    throw CommError(fmt::format("rank {}: cannot resume: rank {} has no valid checkpoint in {}/rank{}/ (all are "
                                "truncated or corrupt; see its error)", comm.rank(), r, cfg.runDir(), r));
  }
  auto describe = [&](int r) {
    const double a = all[r][0].item<double>(), b = all[r][1].item<double>();
    return a < 0 ? std::string("none") : b < 0 ? fmt::format("step {}", a) : fmt::format("steps {} and {}", a, b);
  };
  int64_t target = std::numeric_limits<int64_t>::max();
  bool anyHas = false;
  for (int r = 0; r < comm.size(); ++r) {
    const double newest = all[r][0].item<double>();
    anyHas |= newest >= 0;
    if (newest >= 0) target = std::min(target, int64_t(newest));
  }
  if (!anyHas) return "";
  // A rank without any checkpoint fails the check below (target is never -1).
  for (int r = 0; r < comm.size(); ++r) {
    const bool has = all[r][0].item<double>() == double(target) || all[r][1].item<double>() == double(target);
    GZ_CHECK(has,
             "cannot resume: the ranks hold no common checkpoint step (rank {} has {}, while some rank's newest is "
             "step {}; checkpoints are in {}/rank<r>/); delete the run directory to start afresh",
             r, describe(r), target, cfg.runDir());
  }
  for (const auto& f : mine) {
    if (f.step != target) continue;
    if (f.step != mine[0].step)
      spdlog::warn("resuming from the previous checkpoint (step {}): another rank had not yet written step {} "
                   "when the run stopped", f.step, mine[0].step);
    return f.path;
  }
  GZ_ASSERT(false, "agreed checkpoint step not found locally");
}

bool Trainer::Impl::loadCheckpoint() {
  const std::string path = agreeOnCheckpoint();
  if (path.empty()) return false;
  const bool loaded = loadCheckpointFile(path, [&](torch::serialize::InputArchive& ar) {
    if (controller) controller->load(ar);  // the plan first: GradSync loads that plan's state
    readState(ar);
  });
  GZ_CHECK(loaded, "rank {}: checkpoint {} became unreadable while resuming", comm.rank(), path);
  spdlog::info("resumed from {} at step {} ({:.1f} s of training)", path, step, trainSeconds);
  return true;
}

}  // namespace gradzip::trainer
