// The whole configuration of a training run, parsed once from YAML with the
// strict schema of util/Yaml.h (unknown keys, wrong types and out-of-range
// values are errors naming file, line and key) into typed options, and written
// back with defaults filled in as the run's effective config. Sections:
//   run, model, data, optim, schedule, train, comm, compress, and the optional
//   network (emulated links, honoured by `gradzip launch` and `gradzip compare`)
// `--set key.path=value` overrides are applied to the YAML before parsing.
#pragma once

#include "comm/NetEmulator.h"
#include "data/DataOptions.h"
#include "models/ModelOptions.h"
#include "controller/ControllerOptions.h"
#include "trainer/OptimOptions.h"
#include "sync/Plan.h"

#include <optional>
#include <string>
#include <vector>

namespace gradzip::trainer {

struct RunOptions {
  std::string name = "run";
  std::string outDir = "runs";  // the run directory is out_dir/name
  uint64_t seed = 1;
  int threads = 0;  // intra-op threads per rank; 0 = cores / local ranks
  // One thread and deterministic ATen kernels: resume continues bit for bit.
  bool deterministic = false;
  // "cpu" or "cuda": where the model, optimizer state, batches, gradient
  // buckets and compressor state live; cuda uses the GPU LOCAL_RANK names.
  std::string device = "cpu";
};

struct TrainOptions {
  double epochs = 1;           // fractional epochs allowed
  int64_t maxSteps = 0;        // > 0 caps the run; 0 = no cap (epochs alone)
  int64_t evalEvery = 0;       // steps between evaluations; 0 = once per epoch
  int64_t evalBatches = 0;     // > 0 evaluates on that many batches per rank only
  double clipGradNorm = 0;     // > 0 clips the global gradient norm
  int64_t patience = 0;        // early stop after this many evaluations without improvement; 0 = off
  std::vector<double> targets;  // metric targets reported in the TTA summary
  int64_t checkpointEvery = 0;  // steps; 0 = at every evaluation
  std::string nanPolicy = "stop";  // stop | skip: what a NaN/Inf gradient does on all ranks
  // Bounds of nan_policy: skip; past either the run stops with an error: more
  // than nanSkipMaxRun skipped steps in a row, or more than nanSkipMaxRun in
  // all that are above nanSkipMaxShare of the steps so far.
  int64_t nanSkipMaxRun = 10;
  double nanSkipMaxShare = 0.1;
  int64_t checksumEvery = 200;     // steps between cross-rank parameter checksums; 0 = off
  // A step whose loss exceeds this multiple of the running mean loss is logged
  // as a spike (warning + count in the TTA row); 0 = off.
  double lossSpikeFactor = 3;
};

struct CommOptions {
  int timeoutS = 60;       // every collective and the rendezvous; a dead peer fails within it
  double bucketMb = 25;    // gradient bucket size
  int latencyUs = 0;       // emulated latency per message round, every plan alike (Communicator::setSendDelay)
  bool overlap = true;     // communicate buckets during backward
  // How CUDA tensors travel: auto | nccl | gloo (comm/Rendezvous.h RendezvousOptions::cudaBackend).
  std::string cudaBackend = "auto";
};

struct TrainConfig {
  std::string source;  // the config file
  RunOptions run;
  models::ModelOptions model;
  bool modelChannelsSet = false, modelClassesSet = false, modelVocabSet = false;
  data::DataOptions data;
  OptimOptions optim;
  ScheduleOptions schedule;
  TrainOptions train;
  CommOptions comm;
  Plan plan;  // the static plan; with the controller, the plan it starts from (or its pin)
  std::optional<ControllerOptions> controller;  // `compress: auto`
  // `network: {mbit: 20}` or `{schedule: [{at: 0, mbit: 50}, {at: 60, mbit: 10}]}`
  // (+ burst_ms, queue_ms, mtu, subnet); the rank count comes from the launch.
  std::optional<comm::NetEmulatorOptions> network;

  // Parses `path`; overrides are "dotted.key=yaml-value".
  static TrainConfig load(const std::string& path, const std::vector<std::string>& overrides = {});
  static TrainConfig fromYaml(YamlReader& root);
  YAML::Node toYaml() const;
  // Hash of the effective config: ranks compare it at rendezvous.
  std::string fingerprint() const;
  std::string runDir() const { return run.outDir + "/" + run.name; }
};

// Applies "a.b.c=value" to `root` (creating mappings as needed); the value is
// parsed as YAML. Throws ConfigError naming the override when malformed.
void applyOverride(YAML::Node& root, const std::string& assignment);

}  // namespace gradzip::trainer
