// Implements experiments/CompareSuite.h.
#include "experiments/CompareSuite.h"

#include "util/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace gradzip::experiments {
namespace {

void checkDirName(YamlReader& r, const std::string& key, const std::string& name) {
  auto allowed = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '+';
  };
  const bool ok = !name.empty() && name != "." && name != ".." && std::all_of(name.begin(), name.end(), allowed);
  if (!ok) r.fail(key, fmt::format("'{}' names a directory: use letters, digits and _ - . + only", name));
}

}  // namespace

Suite loadSuite(const std::string& path) {
  auto root = YamlReader::loadFile(path);
  Suite s;
  {
    auto r = root.child("suite");
    s.name = r.requireString("name");
    checkDirName(r, "name", s.name);
    s.worldSize = static_cast<int>(r.getInt("world_size", s.worldSize, 1, 64));
    s.targets = r.getDoubleList("targets", {});
    s.outDir = r.getString("out_dir", s.outDir);
    s.repeats = static_cast<int>(r.getInt("repeats", s.repeats, 1, 20));
    if (r.has("networks"))
      for (auto& n : r.childList("networks")) {
        Network net{n.requireString("name"), YAML::Node()};
        checkDirName(n, "name", net.name);
        for (const auto& k : n.keys())
          if (k != "name") net.block[k] = YAML::Clone(n.raw(k));
        n.finish();
        for (const auto& other : s.networks)
          if (other.name == net.name) n.fail("name", fmt::format("duplicate network name '{}'", net.name));
        s.networks.push_back(net);
      }
    r.finish();
  }
  s.base = YAML::Clone(root.raw("base"));
  if (!s.base || !s.base.IsMap()) root.fail("base", "expected the mapping of a train config (run, model, data, ...)");
  if (s.base["compress"]) root.fail("base", "the base config must not set `compress`; each arm sets its own");
  if (s.base["network"] && !s.networks.empty())
    root.fail("base", "the base config must not set `network` when suite.networks sweeps networks");
  for (auto& a : root.childList("arms")) {
    Arm arm;
    arm.name = a.requireString("name");
    checkDirName(a, "name", arm.name);
    if (a.has("ddp")) {
      if (a.has("compress")) a.fail("ddp", "an arm is either gradzip (compress) or PyTorch DDP (ddp), not both");
      auto d = a.child("ddp");
      arm.ddpHook = d.getEnum("hook", "none", {"none", "fp16", "powersgd"});
      arm.powersgdRank = d.getInt("powersgd_rank", arm.powersgdRank, 1, 1024);
      d.finish();
      arm.compress = YAML::Node(YAML::NodeType::Map);
      arm.compress["name"] = "fp32";  // validates the shared config; the peer ignores it
    } else {
      arm.compress = YAML::Clone(a.raw("compress"));
      const bool autoScalar = arm.compress && arm.compress.IsScalar() && arm.compress.as<std::string>() == "auto";
      if (!arm.compress || (!arm.compress.IsMap() && !autoScalar))
        a.fail("compress", "expected a compress mapping, e.g. {name: thc}, `auto`, or a ddp mapping, e.g. {hook: fp16}");
    }
    a.finish();
    for (const auto& other : s.arms)
      if (other.name == arm.name) a.fail("name", fmt::format("duplicate arm name '{}'", arm.name));
    s.arms.push_back(arm);
  }
  root.finish();
  // The baselines of the end-to-end-utility paper are always present, first.
  // A new vector, not insert(): shifting elements move-assigns them, and
  // assigning a YAML::Node that already has a node re-points that shared node
  // (yaml-cpp's reference semantics), so every shifted arm would take its
  // neighbour's `compress`.
  std::vector<Arm> arms;
  for (const char* base : {"fp16", "fp32"}) {
    bool have = false;
    for (const auto& a : s.arms) have |= a.name == base;
    if (!have) {
      Arm arm{base, YAML::Node(YAML::NodeType::Map), "", 4};
      arm.compress["name"] = base;
      arms.push_back(arm);
    }
  }
  for (const auto& a : s.arms) arms.push_back(a);
  s.arms = std::move(arms);
  return s;
}

}  // namespace gradzip::experiments
