// Implements trainer/RunDirectory.h with std::filesystem and one all-gather of
// each rank's findings.
#include "trainer/RunDirectory.h"

#include "util/Error.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace gradzip::trainer {
namespace fs = std::filesystem;
namespace {

// The files a run writes at the top of its directory (Trainer, TtaLog,
// Controller); rank<r>/ directories hold the rest.
const char* kRunFiles[] = {"config.yaml", "environment.json", "tta.jsonl", "tta.csv", "model.pt", "decisions.jsonl"};

// The rank of a "rank<r>" directory name, or -1.
int rankOfDir(const std::string& name) {
  if (name.size() < 5 || name.rfind("rank", 0) != 0) return -1;
  for (size_t i = 4; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return -1;
  return name.size() > 12 ? -1 : std::stoi(name.substr(4));
}

bool nonEmptyDir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) && !fs::is_empty(p, ec) && !ec;
}

// Creates dir and a probe file in it; "" when that works, else the reason.
std::string cannotWrite(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ec.message();
  const fs::path probe = dir / ".gradzip-write-test";
  {
    std::ofstream f(probe);
    f << "ok\n";
    if (!f.good()) return std::strerror(errno);
  }
  fs::remove(probe, ec);
  return "";
}

}  // namespace

std::vector<std::string> earlierResults(const std::string& dir, int rank) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  if (rank != 0) {
    const std::string own = fmt::format("rank{}", rank);
    if (nonEmptyDir(fs::path(dir) / own)) out.push_back(own + "/");
    return out;
  }
  for (const char* f : kRunFiles)
    if (fs::exists(fs::path(dir) / f, ec)) out.push_back(f);
  std::vector<std::string> ranks;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (rankOfDir(e.path().filename().string()) >= 0 && nonEmptyDir(e.path()))
      ranks.push_back(e.path().filename().string() + "/");
  std::sort(ranks.begin(), ranks.end());
  out.insert(out.end(), ranks.begin(), ranks.end());
  return out;
}

void prepareRunDirectory(const TrainConfig& cfg, comm::Communicator& comm, RunStart start) {
  const std::string dir = cfg.runDir();
  const int rank = comm.rank();
  const fs::path own = fs::path(dir) / fmt::format("rank{}", rank);
  const auto found = earlierResults(dir, rank);
  // Every rank looks before any rank probes: the write probe below creates
  // rank<r>/ with a file in it, which rank 0's look would take for results.
  comm.barrier().wait();
  const std::string why = cannotWrite(own);

  auto mine = torch::tensor({found.empty() ? 0.0 : 1.0, why.empty() ? 0.0 : 1.0}, torch::kDouble);
  std::vector<at::Tensor> all;
  for (int r = 0; r < comm.size(); ++r) all.push_back(torch::empty({2}, torch::kDouble));
  comm.allGather(all, mine).wait();
  std::vector<int> withResults, unwritable;
  for (int r = 0; r < comm.size(); ++r) {
    if (all[r][0].item<double>() != 0) withResults.push_back(r);
    if (all[r][1].item<double>() != 0) unwritable.push_back(r);
  }

  // The ranks at fault throw UserError (exit code 2); the others a
  // CommError (exit code 3) naming them, which `gradzip launch` reports as
  // following from theirs. Where every rank sees the results (one file
  // system), the lowest such rank is the one at fault.
  if (!unwritable.empty()) {
    if (!why.empty())
      throw UserError(fmt::format("{}: run.out_dir: cannot write the run directory {} ({}); choose a writable "
                                  "run.out_dir (e.g. --set run.out_dir=DIR)",
                                  cfg.source, own.string(), why));
    throw CommError(fmt::format("rank {}: {}: run.out_dir: rank(s) [{}] cannot write the run directory {}; see their "
                                "error", rank, cfg.source, fmt::join(unwritable, ", "), dir));
  }
  if (withResults.empty() || start == RunStart::Resume) return;
  if (start == RunStart::Fresh) {
    if (rank != withResults.front())
      throw CommError(fmt::format("rank {}: {}: rank {} refuses to start over an earlier run's results in {}; see its "
                                  "error", rank, cfg.source, withResults.front(), dir));
    throw UserError(fmt::format("{}: the run directory {} holds an earlier run's results ({}); pass --resume to "
                                "continue that run, --overwrite to delete its results and start afresh, or choose "
                                "a new run.name (e.g. --set run.name=NAME)",
                                cfg.source, dir, fmt::join(found, ", ")));
  }
  // Overwrite: each rank clears what it owns; the barrier keeps every rank
  // from writing before rank 0 has removed the shared files.
  std::error_code ec;
  fs::remove_all(own, ec);
  if (rank == 0) {
    for (const char* f : kRunFiles) fs::remove(fs::path(dir) / f, ec);
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (rankOfDir(e.path().filename().string()) >= comm.size()) fs::remove_all(e.path(), ec);
    spdlog::warn("--overwrite: removed the earlier run's results in {} ({})", dir, fmt::join(found, ", "));
  }
  fs::create_directories(own, ec);
  comm.barrier().wait();
}

}  // namespace gradzip::trainer
