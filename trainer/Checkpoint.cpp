// Implements trainer/Checkpoint.h.
#include "trainer/Checkpoint.h"

#include "util/Error.h"
#include "util/Hash.h"

#include <spdlog/spdlog.h>
#include <torch/serialize.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace gradzip::trainer {
namespace fs = std::filesystem;
namespace {

void fsyncFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void writeText(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    GZ_CHECK(out.good(), "cannot write {}", tmp);
  }
  fsyncFile(tmp);
  fs::rename(tmp, path);
}

// The step recorded in path's sidecar when path matches its size and hash.
std::optional<int64_t> validStep(const std::string& path) {
  if (!fs::exists(path) || !fs::exists(path + ".sum")) return std::nullopt;
  std::ifstream in(path + ".sum");
  uint64_t size = 0, hash = 0;
  int64_t step = 0;
  in >> size >> hash >> step;
  if (!in) return std::nullopt;
  auto [n, h] = fileSizeAndHash(path);
  if (n != size || h != hash) return std::nullopt;
  return step;
}

}  // namespace

void writeCheckpoint(const std::string& dir, int64_t step,
                     const std::function<void(torch::serialize::OutputArchive&)>& fill) {
  fs::create_directories(dir);
  const std::string cur = dir + "/checkpoint.pt", prev = dir + "/checkpoint.prev.pt", tmp = dir + "/checkpoint.tmp";
  torch::serialize::OutputArchive ar;
  fill(ar);
  ar.save_to(tmp);
  fsyncFile(tmp);
  auto [n, h] = fileSizeAndHash(tmp);
  if (validStep(cur)) {
    fs::rename(cur, prev);
    fs::rename(cur + ".sum", prev + ".sum");
  }
  fs::rename(tmp, cur);
  writeText(cur + ".sum", fmt::format("{} {} {}\n", n, h, step));
}

std::vector<CheckpointFile> validCheckpoints(const std::string& dir) {
  const std::string candidates[] = {dir + "/checkpoint.pt", dir + "/checkpoint.prev.pt"};
  bool any = false;
  std::vector<CheckpointFile> out;
  for (const auto& path : candidates) {
    if (!fs::exists(path)) continue;
    any = true;
    if (auto step = validStep(path)) {
      out.push_back({path, *step});
    } else {
      spdlog::warn("checkpoint {} is truncated or corrupt (size/hash mismatch); {}", path,
                   &path == &candidates[0] ? "trying the previous one" : "no older checkpoint is kept");
    }
  }
  if (any && out.empty()) throw UserError(fmt::format("{}: no valid checkpoint (all are truncated or corrupt)", dir));
  return out;
}

bool loadCheckpointFile(const std::string& path, const std::function<void(torch::serialize::InputArchive&)>& use) {
  try {
    torch::serialize::InputArchive ar;
    ar.load_from(path);
    use(ar);
    return true;
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    spdlog::warn("checkpoint {} cannot be read ({})", path, firstLine(e.what()));
    return false;
  }
}

std::string readCheckpoint(const std::string& dir, const std::function<void(torch::serialize::InputArchive&)>& use) {
  const auto files = validCheckpoints(dir);
  for (const auto& f : files)
    if (loadCheckpointFile(f.path, use)) return f.path;
  if (!files.empty()) throw UserError(fmt::format("{}: no readable checkpoint", dir));
  return "";
}

void exportStateDict(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : tensors) dict.insert(name, t.detach().cpu().contiguous());
  const auto bytes = torch::pickle_save(c10::IValue(dict));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    GZ_CHECK(out.good(), "cannot write {}", tmp);
  }
  fs::rename(tmp, path);
}

void writeScalar(torch::serialize::OutputArchive& ar, const std::string& key, double v) {
  ar.write(key, torch::tensor({v}, torch::kDouble));
}

double readScalar(torch::serialize::InputArchive& ar, const std::string& key) {
  torch::Tensor t;
  ar.read(key, t);
  return t.item<double>();
}

}  // namespace gradzip::trainer
