// Implements experiments/Compare.h: one effective train config per run (arm x
// network x repeat) of a suite (experiments/CompareSuite.h), the dry-run plan,
// sequential launches, and the summaries (experiments/CompareSummary.h).
#include "experiments/Compare.h"

#include "experiments/CompareSuite.h"
#include "experiments/CompareSummary.h"
#include "experiments/RunReuse.h"
#include "models/Registry.h"
#include "trainer/BuildInfo.h"
#include "launch/EmulatedLaunch.h"
#include "trainer/TrainConfig.h"
#include "util/Error.h"
#include "util/Hash.h"
#include "util/Yaml.h"

#include <nlohmann/json.hpp>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

namespace gradzip::experiments {
namespace fs = std::filesystem;
namespace {

// One training run: an arm on a network, one repeat.
struct Run {
  const Arm* arm;
  std::string group;  // network name ("" without a sweep)
  int repeat;
  std::string dir, name;
  YAML::Node cfg;
  trainer::TrainConfig config;
};
std::string groupDir(const Suite& s, const std::string& group) {
  return s.outDir + "/" + s.name + (group.empty() ? "" : "/" + group);
}

std::string runName(const Arm& a, int repeat) {
  return repeat == 0 ? a.name : fmt::format("{}.r{}", a.name, repeat);
}

// Builds and validates every run's effective config, so a bad arm fails before
// any training starts.
std::vector<Run> planRuns(const Suite& s, const std::string& suitePath) {
  std::vector<Network> groups = s.networks;
  if (groups.empty()) groups.push_back(Network{"", s.base["network"] ? YAML::Clone(s.base["network"]) : YAML::Node()});
  std::vector<Run> runs;
  for (const auto& net : groups)
    for (const auto& arm : s.arms)
      for (int k = 0; k < s.repeats; ++k) {
        Run r{&arm, net.name, k, "", runName(arm, k), YAML::Clone(s.base), {}};
        r.cfg["run"]["name"] = r.name;
        r.cfg["run"]["out_dir"] = groupDir(s, net.name);
        r.cfg["compress"] = YAML::Clone(arm.compress);
        if (net.block && !net.block.IsNull()) r.cfg["network"] = YAML::Clone(net.block);
        if (k > 0) {
          YamlReader first(YAML::Clone(r.cfg), suitePath, "");
          r.cfg["run"]["seed"] = trainer::TrainConfig::fromYaml(first).run.seed + static_cast<uint64_t>(k);
        }
        YamlReader reader(r.cfg, suitePath, "");
        r.config = trainer::TrainConfig::fromYaml(reader);
        r.dir = groupDir(s, net.name) + "/" + r.name;
        runs.push_back(std::move(r));
      }
  return runs;
}

// The config written to the run's arm.yaml. The launcher applies the network;
// the DDP peer's config reader (experiments/python/gz_config.py) does not know
// the section.
YAML::Node armFileConfig(const Run& r) {
  YAML::Node out = YAML::Clone(r.cfg);
  if (!r.arm->ddpHook.empty()) out.remove("network");
  return out;
}

bool selected(const CompareArgs& args, const Arm& a) {
  return args.only.empty() || std::find(args.only.begin(), args.only.end(), a.name) != args.only.end();
}

std::string describePlan(const Run& r, int worldSize) {
  const auto& c = r.config;
  const std::string plan = r.arm->ddpHook.empty()
                               ? (c.controller ? "gradzip auto (controller)" : "gradzip " + c.plan.key())
                               : fmt::format("ddp hook {}{}", r.arm->ddpHook,
                                             r.arm->ddpHook == "powersgd" ? fmt::format(" rank {}", r.arm->powersgdRank)
                                                                          : "");
  const std::string net = c.network ? (c.network->schedule.empty() ? "unshaped" : c.network->schedule.toString()) + " Mbit/s"
                                    : "host";
  const std::string budget = c.train.maxSteps > 0 ? fmt::format("{} epochs, max {} steps", c.train.epochs, c.train.maxSteps)
                                                  : fmt::format("{} epochs", c.train.epochs);
  return fmt::format("{:<24} {} ranks  seed {:<4} network {:<22} {:<36} {}  -> {}", r.name, worldSize, c.run.seed, net,
                     plan, budget, r.dir);
}

// Model parameters from a finished run's effective config (the trainer fills
// in data-dependent sizes such as in_channels and the BERT vocabulary there).
int64_t parametersOf(const std::string& runDir, std::map<std::string, int64_t>& cache) {
  const std::string path = runDir + "/config.yaml";
  if (!fs::exists(path)) return 0;
  try {
    auto root = YamlReader::loadFile(path);
    const std::string key = YAML::Dump(root.raw("model"));
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    auto m = root.child("model");
    const auto model = models::makeModel(models::ModelOptions::fromYaml(m));
    return cache[key] = models::parameterCount(*model);
  } catch (const std::exception& e) {
    spdlog::warn("compare: cannot count the parameters of {} ({}); bits per coordinate stays n/a", path, e.what());
    return 0;
  }
}

}  // namespace

int compareCommand(const CompareArgs& args, const std::string& selfExe) {
  const Suite s = loadSuite(args.suite);
  for (const auto& name : args.only) {
    bool known = false;
    for (const auto& a : s.arms) known |= a.name == name;
    if (!known) throw UserError(fmt::format("--only {}: no such arm in {}", name, args.suite));
  }
  const std::vector<Run> runs = planRuns(s, args.suite);
  // A finished run of an arm whose config changed since (the suite was
  // edited) must not be skipped and then summarised as if it were this arm.
  std::vector<std::string> stale;
  for (const auto& r : runs)
    if (selected(args, *r.arm) && !args.rerun && fs::exists(r.dir + "/done") && !sameArmConfig(r.dir, armFileConfig(r)))
      stale.push_back(r.dir);
  if (!stale.empty())
    throw UserError(fmt::format("compare {}: {} finished run(s) trained a different config than the suite now gives "
                                "their arm: {}. Move them away (or pass --rerun to train every selected arm again)",
                                args.suite, stale.size(), fmt::join(stale, ", ")));
  // A gradzip run another suite under out_dir finished with this executable.
  const std::string exeFingerprint = args.reuse && !args.rerun ? fileFingerprint(selfExe) : "";
  auto reusable = [&](const Run& r) -> std::optional<std::string> {
    if (!r.arm->ddpHook.empty()) return std::nullopt;
    return findReusableRun(s.outDir, r.dir, r.cfg, s.worldSize, exeFingerprint);
  };

  if (args.dryRun) {
    std::cout << fmt::format("suite {} ({}): {} arms x {} network(s) x {} repeat(s) = {} runs on {} ranks; targets [{}]\n",
                             s.name, args.suite, s.arms.size(), std::max<size_t>(1, s.networks.size()), s.repeats,
                             runs.size(), s.worldSize, fmt::join(s.targets, ", "));
    for (const auto& r : runs) {
      if (!selected(args, *r.arm)) continue;
      const bool done = fs::exists(r.dir + "/done") && !args.rerun;
      const auto from = done ? std::nullopt : reusable(r);
      std::cout << "  " << (r.group.empty() ? "" : "[" + r.group + "] ") << describePlan(r, s.worldSize)
                << (done ? "  (finished; skipped)" : from ? "  (would copy " + *from + ")" : "") << "\n";
    }
    std::cout << "dry run: every config parsed; nothing was trained\n";
    return 0;
  }

  // Arms whose run failed (a diverging compressor, a dead rank, ...): the
  // others still run and the summary shows what the failed ones logged, then
  // compare fails naming them. A rerun retries them (they have no `done`).
  std::vector<std::string> failed;
  for (const auto& r : runs) {
    if (!selected(args, *r.arm)) continue;
    if (fs::exists(r.dir + "/done") && !args.rerun) {
      spdlog::info("arm {}: finished before; skipping (use --rerun to repeat)", r.name);
      continue;
    }
    if (const auto from = reusable(r)) {
      reuseRun(*from, r.dir);
      spdlog::info("arm {}: copied {} (same config, world size and executable; --no-reuse trains it here)", r.name,
                   *from);
      continue;
    }
    fs::create_directories(r.dir);
    const std::string cfgPath = r.dir + "/arm.yaml";
    {
      YAML::Emitter e;
      e << armFileConfig(r);
      std::ofstream(cfgPath) << "# generated by gradzip compare from " << args.suite << "\n" << e.c_str() << "\n";
    }
    fs::remove(r.dir + "/tta.jsonl");
    fs::remove(r.dir + "/tta.csv");
    fs::remove(r.dir + "/failed");
    spdlog::info("arm {}{} ({} ranks, seed {}): {}", r.group.empty() ? "" : r.group + "/", r.name, s.worldSize,
                 r.config.run.seed, cfgPath);
    trainer::LaunchOptions lo;
    lo.nprocs = s.worldSize;
    // The arm's directory may hold a failed or --rerun attempt's results;
    // compare decided to train it again, so they are replaced.
    lo.command = {selfExe, "train", cfgPath, "--overwrite"};
    if (!r.arm->ddpHook.empty())
      lo.command = {trainer::pythonExecutable(), std::string(trainer::sourceDir()) + "/experiments/python/ddp_peer.py",
                    "--config", cfgPath, "--hook", r.arm->ddpHook, "--powersgd-rank",
                    std::to_string(r.arm->powersgdRank), "--out", r.dir};
    const auto [rc, sig] = trainer::launchOn(lo, r.config.network);
    if (sig != 0) {
      // The user's Ctrl-C or kill reached the launcher, which stopped this
      // arm's ranks; the suite stops with it rather than start the next arm.
      std::ofstream(r.dir + "/failed") << "interrupted by " << strsignal(sig) << "\n";
      throw UserError(fmt::format("compare: interrupted by {} during arm {} ({}); the arms that finished are kept, "
                                  "and the same command continues with the others",
                                  strsignal(sig), r.name, r.dir));
    }
    if (rc != 0) {
      const std::string why = fmt::format("exit status {}", rc);
      std::ofstream(r.dir + "/failed") << why << "\n";
      failed.push_back(fmt::format("{} ({}; {})", r.name, why, r.dir));
      spdlog::error("arm {} failed ({}); see the log above. Going on with the other arms; its rows so far stay "
                    "in the summary",
                    r.name, why);
      continue;
    }
    std::ofstream(r.dir + "/done") << "ok\n";
  }

  // One summary per network group (the suite directory itself without a sweep).
  std::map<std::string, int64_t> paramCache;
  std::string allMd;
  std::string brief;  // the few columns a newcomer needs; every column is in summary.md
  nlohmann::json byNetwork = nlohmann::json::object();
  std::vector<std::string> groups;
  for (const auto& r : runs)
    if (std::find(groups.begin(), groups.end(), r.group) == groups.end()) groups.push_back(r.group);
  for (const auto& g : groups) {
    SummaryInput in;
    in.targets = s.targets;
    const auto* any = &*std::find_if(runs.begin(), runs.end(), [&](const Run& r) { return r.group == g; });
    const std::string net = any->config.network
                                ? "network " + (any->config.network->schedule.empty() ? std::string("unshaped")
                                                                                      : any->config.network->schedule.toString()) +
                                      " Mbit/s"
                                : "host network";
    in.title = fmt::format("{}{} ({} ranks, {})", s.name, g.empty() ? "" : " / " + g, s.worldSize, net);
    int64_t params = 0;
    for (const auto& r : runs)
      if (r.group == g && !params) params = parametersOf(r.dir, paramCache);
    for (const auto& arm : s.arms) {
      ArmStats a{arm.name, "", {}, params};
      for (const auto& r : runs)
        if (r.group == g && r.arm == &arm) {
          if (a.configuredPlan.empty())
            a.configuredPlan = !arm.ddpHook.empty() ? "ddp-" + arm.ddpHook
                               : r.config.controller ? "auto"
                                                     : r.config.plan.key();
          a.runs.push_back(readRun(r.dir, s.targets));
        }
      in.arms.push_back(std::move(a));
    }
    const std::string dir = groupDir(s, g);
    fs::create_directories(dir);
    std::string md = summaryMarkdown(in);
    brief += (brief.empty() ? "" : "\n") + summaryBrief(in);
    std::string copied;
    for (const auto& r : runs)
      if (r.group == g && fs::exists(r.dir + "/reused_from")) {
        std::ifstream f(r.dir + "/reused_from");
        std::string from;
        std::getline(f, from);
        copied += fmt::format("{}- {}: the run of {} (same config, world size and executable)\n",
                              copied.empty() ? "\nCopied from other suites:\n" : "", r.name, from);
      }
    md += copied;
    const nlohmann::json js = summaryJson(in);
    std::ofstream(dir + "/summary.md") << md;
    std::ofstream(dir + "/summary.json") << js.dump(2) << "\n";
    allMd += (allMd.empty() ? "" : "\n") + md;
    byNetwork[g] = js;
  }
  if (!s.networks.empty()) {
    std::ofstream(groupDir(s, "") + "/summary.md") << allMd;
    std::ofstream(groupDir(s, "") + "/summary.json")
        << nlohmann::json{{"targets", s.targets}, {"networks", byNetwork}}.dump(2) << "\n";
  }
  std::cout << "\n" << brief << "\nfull table (every column): " << groupDir(s, "") << "/summary.md\n";
  if (!failed.empty())
    throw UserError(fmt::format("{} run(s) failed: {}. The summary shows the rows they logged before failing; "
                                "a rerun retries them",
                                failed.size(), fmt::join(failed, ", ")));
  return 0;
}

}  // namespace gradzip::experiments
