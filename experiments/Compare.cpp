// Implements experiments/Compare.h: arm configs, sequential launches, and the
// TTA summary (markdown + JSON) with utility over FP16 and FP32.
#include "experiments/Compare.h"

#include "trainer/BuildInfo.h"
#include "trainer/EmulatedLaunch.h"
#include "trainer/TrainConfig.h"
#include "util/Error.h"
#include "util/Yaml.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

namespace gradzip::experiments {
namespace fs = std::filesystem;
namespace {

// A gradzip arm trains with `compress`; a peer arm runs PyTorch DDP with a
// stock comm hook (experiments/python/ddp_peer.py) on the same base config.
struct Arm {
  std::string name;
  YAML::Node compress;
  std::string ddpHook;  // "" = gradzip arm; none | fp16 | powersgd
  int64_t powersgdRank = 4;
};

struct Suite {
  std::string name;
  int worldSize = 2;
  std::vector<double> targets;
  std::string outDir = "runs";
  YAML::Node base;
  std::vector<Arm> arms;
};

Suite loadSuite(const std::string& path) {
  auto root = YamlReader::loadFile(path);
  Suite s;
  {
    auto r = root.child("suite");
    s.name = r.requireString("name");
    s.worldSize = static_cast<int>(r.getInt("world_size", s.worldSize, 1, 64));
    s.targets = r.getDoubleList("targets", {});
    s.outDir = r.getString("out_dir", s.outDir);
    r.finish();
  }
  s.base = YAML::Clone(root.raw("base"));
  if (!s.base || !s.base.IsMap()) root.fail("base", "expected the mapping of a train config (run, model, data, ...)");
  if (s.base["compress"]) root.fail("base", "the base config must not set `compress`; each arm sets its own");
  for (auto& a : root.childList("arms")) {
    Arm arm;
    arm.name = a.requireString("name");
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
      if (!arm.compress || !arm.compress.IsMap())
        a.fail("compress", "expected a compress mapping, e.g. {name: thc}, or a ddp mapping, e.g. {hook: fp16}");
    }
    a.finish();
    for (const auto& other : s.arms)
      if (other.name == arm.name) a.fail("name", fmt::format("duplicate arm name '{}'", arm.name));
    s.arms.push_back(arm);
  }
  root.finish();
  // The baselines of the end-to-end-utility paper are always present.
  for (const char* base : {"fp32", "fp16"}) {
    bool have = false;
    for (const auto& a : s.arms) have |= a.name == base;
    if (!have) {
      Arm arm{base, YAML::Node(YAML::NodeType::Map)};
      arm.compress["name"] = base;
      s.arms.insert(s.arms.begin(), arm);
    }
  }
  return s;
}

struct ArmResult {
  std::string name, plan;
  std::vector<std::optional<double>> timeToTarget;
  double finalMetric = NAN, trainSeconds = 0, stepTime = 0, exposed = 0, encodeDecode = 0, compute = 0;
  int64_t steps = 0, bytes = 0;
  bool ok = false;
};

ArmResult summarise(const std::string& name, const std::string& dir, const std::vector<double>& targets) {
  ArmResult r;
  r.name = name;
  r.timeToTarget.assign(targets.size(), std::nullopt);
  std::ifstream in(dir + "/tta.jsonl");
  std::string line;
  double stepSum = 0, exposedSum = 0, encSum = 0, computeSum = 0;
  int rows = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    const auto& m = j["metrics"];
    double metric = m.contains("accuracy") ? m["accuracy"].get<double>()
                                           : (m.contains("mlm_accuracy") ? m["mlm_accuracy"].get<double>() : NAN);
    const double t = j["train_seconds"].get<double>();
    for (size_t i = 0; i < targets.size(); ++i)
      if (!r.timeToTarget[i] && metric >= targets[i]) r.timeToTarget[i] = t;
    r.finalMetric = metric;
    r.trainSeconds = t;
    r.steps = j["step"].get<int64_t>();
    r.bytes = j["bytes"].get<int64_t>();
    r.plan = j["plan"].get<std::string>();
    const auto& b = j["breakdown"];
    stepSum += b["step"].get<double>();
    exposedSum += b["exposed"].get<double>();
    encSum += b["encode"].get<double>() + b["decode"].get<double>();
    computeSum += b["compute"].get<double>();
    ++rows;
    r.ok = true;
  }
  if (rows) {
    r.stepTime = stepSum / rows;
    r.exposed = exposedSum / rows;
    r.encodeDecode = encSum / rows;
    r.compute = computeSum / rows;
  }
  return r;
}

std::string fmtTime(const std::optional<double>& t) { return t ? fmt::format("{:.1f} s", *t) : "never"; }

// Speedup of `arm` over `base` at the highest target both reached.
std::string speedup(const ArmResult& arm, const ArmResult& base) {
  for (size_t i = arm.timeToTarget.size(); i-- > 0;)
    if (arm.timeToTarget[i] && base.timeToTarget[i] && *arm.timeToTarget[i] > 0)
      return fmt::format("{:.2f}x", *base.timeToTarget[i] / *arm.timeToTarget[i]);
  return "n/a";
}

}  // namespace

int compareCommand(const CompareArgs& args, const std::string& selfExe) {
  const Suite s = loadSuite(args.suite);
  const std::string suiteDir = s.outDir + "/" + s.name;
  fs::create_directories(suiteDir);

  for (const auto& arm : s.arms) {
    if (!args.only.empty() && std::find(args.only.begin(), args.only.end(), arm.name) == args.only.end()) continue;
    const std::string armDir = suiteDir + "/" + arm.name;
    if (fs::exists(armDir + "/done") && !args.rerun) {
      spdlog::info("arm {}: finished before; skipping (use --rerun to repeat)", arm.name);
      continue;
    }
    YAML::Node cfg = YAML::Clone(s.base);
    cfg["run"]["name"] = arm.name;
    cfg["run"]["out_dir"] = suiteDir;
    cfg["compress"] = arm.compress;
    // Validate now, so a bad arm fails before any training starts.
    YamlReader reader(cfg, args.suite, "");
    const auto armConfig = trainer::TrainConfig::fromYaml(reader);
    fs::create_directories(armDir);
    const std::string cfgPath = armDir + "/arm.yaml";
    {
      YAML::Emitter e;
      e << cfg;
      std::ofstream(cfgPath) << "# generated by gradzip compare from " << args.suite << "\n" << e.c_str() << "\n";
    }
    fs::remove(armDir + "/tta.jsonl");
    fs::remove(armDir + "/tta.csv");
    spdlog::info("arm {} ({} ranks): {}", arm.name, s.worldSize, cfgPath);
    trainer::LaunchOptions lo;
    lo.nprocs = s.worldSize;
    lo.command = {selfExe, "train", cfgPath};
    if (!arm.ddpHook.empty())
      lo.command = {trainer::pythonExecutable(), std::string(trainer::sourceDir()) + "/experiments/python/ddp_peer.py",
                    "--config", cfgPath, "--hook", arm.ddpHook, "--powersgd-rank", std::to_string(arm.powersgdRank),
                    "--out", armDir};
    const int rc = trainer::launchOn(lo, armConfig.network);
    if (rc != 0) throw UserError(fmt::format("arm {} failed (exit status {}); see the log above", arm.name, rc));
    std::ofstream(armDir + "/done") << "ok\n";
  }

  // Summary over every arm that has a log.
  std::vector<ArmResult> results;
  for (const auto& arm : s.arms) results.push_back(summarise(arm.name, suiteDir + "/" + arm.name, s.targets));
  const ArmResult* fp16 = nullptr;
  const ArmResult* fp32 = nullptr;
  for (const auto& r : results) {
    if (r.name == "fp16") fp16 = &r;
    if (r.name == "fp32") fp32 = &r;
  }
  std::string md = fmt::format("# {}: time to accuracy ({} ranks)\n\n", s.name, s.worldSize);
  md += "| arm | plan |";
  for (double t : s.targets) md += fmt::format(" TTA {:.3g} |", t);
  md += " final metric | utility vs FP16 | vs FP32 | steps | train s | step ms | compute ms | exposed comm ms | "
        "enc+dec % | MB sent/rank |\n|---|---|";
  for (size_t i = 0; i < s.targets.size(); ++i) md += "---|";
  md += "---|---|---|---|---|---|---|---|---|---|\n";
  nlohmann::json js = nlohmann::json::array();
  for (const auto& r : results) {
    if (!r.ok) {
      md += fmt::format("| {} | (not run) |\n", r.name);
      continue;
    }
    md += fmt::format("| {} | `{}` |", r.name, r.plan);
    for (const auto& t : r.timeToTarget) md += " " + fmtTime(t) + " |";
    md += fmt::format(" {:.4f} | {} | {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f}% | {:.1f} |\n", r.finalMetric,
                      fp16 ? speedup(r, *fp16) : "n/a", fp32 ? speedup(r, *fp32) : "n/a", r.steps, r.trainSeconds,
                      r.stepTime * 1e3, r.compute * 1e3, r.exposed * 1e3,
                      r.stepTime > 0 ? 100.0 * r.encodeDecode / r.stepTime : 0.0, r.bytes / 1e6);
    nlohmann::json tt = nlohmann::json::array();
    for (const auto& t : r.timeToTarget) tt.push_back(t ? nlohmann::json(*t) : nlohmann::json(nullptr));
    js.push_back({{"arm", r.name}, {"plan", r.plan}, {"time_to_target", tt}, {"targets", s.targets},
                  {"final_metric", r.finalMetric}, {"train_seconds", r.trainSeconds}, {"steps", r.steps},
                  {"step_seconds", r.stepTime}, {"compute_seconds", r.compute}, {"exposed_seconds", r.exposed},
                  {"encode_decode_seconds", r.encodeDecode}, {"bytes", r.bytes}});
  }
  md += "\nTTA = training wall-clock seconds (evaluation excluded) until the test metric first reaches the "
        "target; \"never\" = not reached within the budget. Utility = TTA(FP16) / TTA(arm) at the highest target "
        "both reached.\n";
  std::ofstream(suiteDir + "/summary.md") << md;
  std::ofstream(suiteDir + "/summary.json") << js.dump(2) << "\n";
  std::cout << "\n" << md << "\nwritten: " << suiteDir << "/summary.md\n";
  return 0;
}

}  // namespace gradzip::experiments
