// Implements experiments/RunReuse.h.
#include "experiments/RunReuse.h"

#include "util/Error.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

namespace gradzip::experiments {
namespace fs = std::filesystem;
namespace {

// The arm config as the run's identity: without its name and output directory.
// (A fresh node: assigning to a yaml-cpp Node writes through to what it refers to.)
std::string runKey(const YAML::Node& armCfg) {
  YAML::Node cfg = YAML::Clone(armCfg);
  if (cfg["run"] && cfg["run"].IsMap()) {
    cfg["run"].remove("name");
    cfg["run"].remove("out_dir");
  }
  return canonicalYaml(cfg);
}

// The run key of a run directory's arm.yaml (throws when it cannot be read).
std::string armFileKey(const fs::path& dir) { return runKey(YAML::LoadFile((dir / "arm.yaml").string())); }

// The candidate's key, world size and executable fingerprint; nullopt when a
// file is missing or unreadable (such a directory is simply not reused).
struct Recorded {
  std::string key, fingerprint;
  int worldSize = 0;
};
std::optional<Recorded> recorded(const fs::path& dir) {
  try {
    if (!fs::exists(dir / "done") || !fs::exists(dir / "arm.yaml") || !fs::exists(dir / "environment.json"))
      return std::nullopt;
    std::ifstream in(dir / "environment.json");
    const auto env = nlohmann::json::parse(in);
    Recorded r;
    r.key = armFileKey(dir);
    r.fingerprint = env.value("executable_fingerprint", std::string());
    r.worldSize = env.value("world_size", 0);
    return r;
  } catch (const std::exception& e) {
    spdlog::debug("compare: {} is not reusable ({})", dir.string(), e.what());
    return std::nullopt;
  }
}
}  // namespace

std::string canonicalYaml(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      std::map<std::string, std::string> items;
      for (const auto& kv : node) items[kv.first.Scalar()] = canonicalYaml(kv.second);
      std::string out = "{";
      for (const auto& [k, v] : items) out += k + ":" + v + ",";
      return out + "}";
    }
    case YAML::NodeType::Sequence: {
      std::string out = "[";
      for (const auto& v : node) out += canonicalYaml(v) + ",";
      return out + "]";
    }
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    default:
      return "~";
  }
}

std::optional<std::string> findReusableRun(const std::string& outDir, const std::string& self,
                                           const YAML::Node& armCfg, int worldSize,
                                           const std::string& executableFingerprint) {
  if (executableFingerprint.empty() || !fs::is_directory(outDir)) return std::nullopt;
  const std::string key = runKey(armCfg);
  const fs::path me = fs::weakly_canonical(self);
  std::vector<fs::path> dirs;
  for (auto it = fs::recursive_directory_iterator(outDir, fs::directory_options::skip_permission_denied);
       it != fs::recursive_directory_iterator(); ++it) {
    if (it.depth() >= 2) it.disable_recursion_pending();  // suite / group / arm
    if (it->is_directory() && fs::exists(it->path() / "done")) dirs.push_back(it->path());
  }
  std::sort(dirs.begin(), dirs.end());  // the same choice on every call
  for (const auto& d : dirs) {
    if (fs::weakly_canonical(d) == me || fs::exists(d / "reused_from")) continue;  // reuse originals only
    const auto r = recorded(d);
    if (r && r->key == key && r->worldSize == worldSize && r->fingerprint == executableFingerprint)
      return d.string();
  }
  return std::nullopt;
}

bool sameArmConfig(const std::string& dir, const YAML::Node& armCfg) {
  try {
    return armFileKey(dir) == runKey(armCfg);
  } catch (const std::exception&) {
    return false;
  }
}

void reuseRun(const std::string& from, const std::string& to) {
  GZ_CHECK(!fs::exists(fs::path(to) / "done"), "compare: {} already holds a finished run", to);
  fs::create_directories(to);
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  std::ofstream(fs::path(to) / "reused_from") << from << "\n";
  GZ_CHECK(fs::exists(fs::path(to) / "done"), "compare: copying {} to {} failed", from, to);
}

}  // namespace gradzip::experiments
