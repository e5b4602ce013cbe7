// Implements trainer/TrainConfig.h.
#include "trainer/TrainConfig.h"

#include "compress/Factory.h"
#include "util/Error.h"
#include "util/Hash.h"

#include <fstream>
#include <sstream>

namespace gradzip::trainer {
namespace {

RunOptions runFromYaml(YamlReader r) {
  RunOptions o;
  o.name = r.getString("name", o.name);
  if (o.name.empty() || o.name.find('/') != std::string::npos) r.fail("name", "must be a non-empty name without '/'");
  o.outDir = r.getString("out_dir", o.outDir);
  o.seed = static_cast<uint64_t>(r.getInt("seed", static_cast<int64_t>(o.seed), 0));
  o.threads = static_cast<int>(r.getInt("threads", o.threads, 0, 1024));
  o.deterministic = r.getBool("deterministic", o.deterministic);
  o.device = r.getEnum("device", o.device, {"cpu", "cuda"});
  r.finish();
  return o;
}

TrainOptions trainFromYaml(YamlReader r) {
  TrainOptions o;
  o.epochs = r.getDouble("epochs", o.epochs, 0.0, 1e6);
  o.maxSteps = r.getInt("max_steps", o.maxSteps, 0);
  if (o.epochs <= 0 && o.maxSteps <= 0) r.fail("epochs", "set epochs > 0 or max_steps > 0");
  o.evalEvery = r.getInt("eval_every", o.evalEvery, 0);
  o.evalBatches = r.getInt("eval_batches", o.evalBatches, 0);
  o.clipGradNorm = r.getDouble("clip_grad_norm", o.clipGradNorm, 0.0);
  o.patience = r.getInt("patience", o.patience, 0);
  o.targets = r.getDoubleList("targets", o.targets);
  o.checkpointEvery = r.getInt("checkpoint_every", o.checkpointEvery, 0);
  o.nanPolicy = r.getEnum("nan_policy", o.nanPolicy, {"stop", "skip"});
  o.nanSkipMaxRun = r.getInt("nan_skip_max_run", o.nanSkipMaxRun, 0);
  o.nanSkipMaxShare = r.getDouble("nan_skip_max_share", o.nanSkipMaxShare, 0.0, 1.0);
  o.checksumEvery = r.getInt("checksum_every", o.checksumEvery, 0);
  o.lossSpikeFactor = r.getDouble("loss_spike_factor", o.lossSpikeFactor, 0.0);
  if (o.lossSpikeFactor > 0 && o.lossSpikeFactor <= 1) r.fail("loss_spike_factor", "must be 0 (off) or above 1");
  r.finish();
  return o;
}

CommOptions commFromYaml(YamlReader r) {
  CommOptions o;
  o.timeoutS = static_cast<int>(r.getInt("timeout_s", o.timeoutS, 1, 86400));
  o.bucketMb = r.getDouble("bucket_mb", o.bucketMb, 0.001, 4096);
  o.latencyUs = static_cast<int>(r.getInt("latency_us", o.latencyUs, 0, 10000000));
  o.overlap = r.getBool("overlap", o.overlap);
  o.cudaBackend = r.getEnum("cuda_backend", o.cudaBackend, {"auto", "nccl", "gloo"});
  r.finish();
  return o;
}

// `compress:` is a plan mapping ({name: thc, collective: ps, thc: {bits: 4}}),
// or the controller: `auto`, or a mapping with name: auto and its options.
void compressFromYaml(YamlReader& root, TrainConfig& c) {
  if (!root.has("compress")) {
    c.plan = Plan::fromYaml(root.child("compress"));
    return;
  }
  YAML::Node node = root.raw("compress");
  if (node.IsScalar() && node.as<std::string>() == "auto") {
    c.controller = ControllerOptions{};
    c.controller->stat = ControllerOptions::defaultStat(c.optim.name);
    c.plan = c.controller->initial;
    return;
  }
  YamlReader r = root.view(node, "compress");
  if (node.IsMap() && node["name"] && node["name"].IsScalar() && node["name"].as<std::string>() == "auto") {
    r.getString("name", "auto");
    c.controller = ControllerOptions::fromYaml(r, c.optim.name);
    c.plan = c.controller->pin ? *c.controller->pin : c.controller->initial;
    return;
  }
  c.plan = Plan::fromYaml(r);
}

}  // namespace

void applyOverride(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(fmt::format("--set {}: expected key.path=value", assignment));
  const std::string path = assignment.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("--set {}: malformed value: {}", assignment, e.msg));
  }
  // Walk with explicit node copies: yaml-cpp's operator[] on a reference
  // would rebind; reset() re-points a handle without touching the tree.
  YAML::Node cur;
  cur.reset(root);
  std::stringstream ss(path);
  std::string part;
  std::vector<std::string> parts;
  while (std::getline(ss, part, '.')) parts.push_back(part);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!cur[parts[i]] || cur[parts[i]].IsNull()) cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
    if (!cur[parts[i]].IsMap())
      throw ConfigError(fmt::format("--set {}: '{}' is not a mapping", assignment, parts[i]));
    YAML::Node next = cur[parts[i]];
    cur.reset(next);
  }
  cur[parts.back()] = value;
}

TrainConfig TrainConfig::load(const std::string& path, const std::vector<std::string>& overrides) {
  auto root = YamlReader::loadFile(path);
  if (root.keys().empty() && overrides.empty())
    throw ConfigError(fmt::format("{}: the config file is empty (or only comments); a run needs at least "
                                  "model.name (see configs/ for examples)",
                                  path));
  if (!overrides.empty()) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    YAML::Node node = YAML::Load(text.str());
    if (!node || node.IsNull()) node = YAML::Node(YAML::NodeType::Map);
    std::map<std::string, std::string> origins;
    for (const auto& o : overrides) {
      applyOverride(node, o);
      origins[o.substr(0, o.find('='))] = o;  // a later --set of the same key wins, as in the node
    }
    root = YamlReader(node, path, "");
    root.setOverrides(std::move(origins));
  }
  auto cfg = fromYaml(root);
  cfg.source = path;
  return cfg;
}

TrainConfig TrainConfig::fromYaml(YamlReader& root) {
  TrainConfig c;
  c.source = root.file();
  c.run = runFromYaml(root.child("run"));
  {
    auto m = root.child("model");
    c.modelChannelsSet = m.has("in_channels");
    c.modelClassesSet = m.has("num_classes");
    c.modelVocabSet = m.child("bert").has("vocab_size");
    c.model = models::ModelOptions::fromYaml(m);
  }
  {
    auto d = root.child("data");
    c.data = data::DataOptions::fromYaml(d);
  }
  {
    auto o = root.child("optim");
    c.optim = OptimOptions::fromYaml(o);
    auto s = root.child("schedule");
    c.schedule = ScheduleOptions::fromYaml(s);
  }
  c.train = trainFromYaml(root.child("train"));
  c.comm = commFromYaml(root.child("comm"));
  compressFromYaml(root, c);
  if (root.has("network")) {
    auto n = root.child("network");
    if (n.has("ranks")) n.fail("ranks", "the rank count comes from `launch -n` or the suite's world_size");
    c.network = comm::NetEmulatorOptions::fromYaml(n);
  }
  root.finish();
  return c;
}

YAML::Node TrainConfig::toYaml() const {
  YAML::Node n;
  auto r = n["run"];
  r["name"] = run.name;
  r["out_dir"] = run.outDir;
  r["seed"] = run.seed;
  r["threads"] = run.threads;
  r["deterministic"] = run.deterministic;
  r["device"] = run.device;
  YAML::Node m;
  model.toYaml(m);
  n["model"] = m;
  YAML::Node d;
  data.toYaml(d);
  n["data"] = d;
  YAML::Node o, s;
  optim.toYaml(o);
  schedule.toYaml(s);
  n["optim"] = o;
  n["schedule"] = s;
  auto t = n["train"];
  t["epochs"] = train.epochs;
  t["max_steps"] = train.maxSteps;
  t["eval_every"] = train.evalEvery;
  t["eval_batches"] = train.evalBatches;
  t["clip_grad_norm"] = train.clipGradNorm;
  t["patience"] = train.patience;
  t["targets"] = train.targets;
  t["checkpoint_every"] = train.checkpointEvery;
  t["nan_policy"] = train.nanPolicy;
  t["nan_skip_max_run"] = train.nanSkipMaxRun;
  t["nan_skip_max_share"] = train.nanSkipMaxShare;
  t["checksum_every"] = train.checksumEvery;
  t["loss_spike_factor"] = train.lossSpikeFactor;
  auto cm = n["comm"];
  cm["timeout_s"] = comm.timeoutS;
  cm["bucket_mb"] = comm.bucketMb;
  cm["latency_us"] = comm.latencyUs;
  cm["overlap"] = comm.overlap;
  cm["cuda_backend"] = comm.cudaBackend;
  n["compress"] = controller ? controller->toYaml() : plan.toYaml();
  if (network) {
    YAML::Node net;
    network->toYaml(net);
    net.remove("ranks");
    n["network"] = net;
  }
  return n;
}

std::string TrainConfig::fingerprint() const {
  YAML::Emitter e;
  e << toYaml();
  Fnv1a64 h;  // of the effective config text
  h.update(e.c_str(), e.size());
  return fmt::format("{:016x}", h.value());
}

}  // namespace gradzip::trainer
