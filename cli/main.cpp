// The gradzip command line: train, launch, compare, simulate, config, bench,
// version. This file sits on top of every module and nothing includes it. User errors (and paths that
// cannot be used) print one clear line and exit 2; communication failures exit
// 3; bugs exit 70; command-line errors keep CLI11's codes (105-109).
#include "comm/NcclBackend.h"
#include "comm/ProcessGroupCommunicator.h"
#include "compress/CodecPath.h"
#include "experiments/Benchmarks.h"
#include "experiments/Compare.h"
#include "cli/Commands.h"
#include "cli/ConfigReference.h"
#include "cli/Simulate.h"
#include "launch/EmulatedLaunch.h"
#include "trainer/TrainConfig.h"
#include "util/Allocator.h"
#include "util/Error.h"
#include "util/Log.h"

#include <CLI/CLI.hpp>
#include <c10/util/Logging.h>

#include <filesystem>
#include <iostream>

using namespace gradzip;

namespace {

bool looksLikeConfig(const std::string& s) {
  auto ext = std::filesystem::path(s).extension().string();
  return ext == ".yaml" || ext == ".yml";
}

std::string selfExe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

// Levenshtein distance, for "did you mean" on a mistyped subcommand.
size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// CLI11 reports a mistyped subcommand as a missing one ("A subcommand is
// required"), since extras are allowed for `launch -- ...`. When a command that
// requires a subcommand got none but a leftover word, name that word, the
// valid subcommands and the closest one. Empty when that is not the case.
std::string unknownSubcommand(CLI::App& app) {
  CLI::App* at = &app;
  for (;;) {
    auto parsed = at->get_subcommands();
    if (parsed.empty()) break;
    at = parsed.front();
  }
  auto left = at->remaining();
  if (left.empty()) left = app.remaining();
  if (left.empty() || at->get_subcommands({}).empty() || left.front().rfind("-", 0) == 0) return "";
  std::vector<std::string> names;
  std::string closest;
  size_t best = 3;  // suggest only within two edits
  for (const auto* sub : at->get_subcommands({})) {
    names.push_back(sub->get_name());
    const size_t d = editDistance(left.front(), sub->get_name());
    if (d < best) best = d, closest = sub->get_name();
  }
  const std::string command = at == &app ? "gradzip" : "gradzip " + at->get_name();
  return fmt::format("{}: unknown subcommand '{}' (valid: {}){}", command, left.front(), fmt::join(names, ", "),
                     closest.empty() ? "" : fmt::format("; did you mean '{}'?", closest));
}

}  // namespace

int main(int argc, char** argv) {
  retainFreedMemory();
  comm::configureProcessGroups();
  CLI::App app{"gradzip: compressed data-parallel training (LibTorch + c10d)", "gradzip"};
  app.require_subcommand(1);
  std::string logLevel = "info";
  app.add_option("--log-level", logLevel,
                 "trace, debug, info, warn, error, critical or off (ranks above 0 log info at warn; "
                 "GRADZIP_LOG_LEVEL overrides it)")
      ->capture_default_str()
      ->check(CLI::IsMember(logLevels()));

  auto* version = app.add_subcommand("version", "Print gradzip and LibTorch versions");

  auto* configCmd = app.add_subcommand("config", "Print the config schema");
  bool reference = false;
  configCmd->add_flag("--reference", reference,
                      "Every config key with its type, default and range, as Markdown (docs/configuration.md)")
      ->required();

  auto* train = app.add_subcommand("train", "Train from a YAML config (one rank; use launch or torchrun for more)");
  trainer::TrainArgs trainArgs;
  train->add_option("config", trainArgs.config, "YAML config file")->required()->check(CLI::ExistingFile);
  auto* resumeFlag = train->add_flag("--resume", trainArgs.resume, "Continue from the run directory's last checkpoint");
  train->add_flag("--overwrite", trainArgs.overwrite,
                  "Delete the results of an earlier run under the same run directory (out_dir/name) and start afresh")
      ->excludes(resumeFlag);
  train->add_option("--set", trainArgs.overrides, "Override a config value, e.g. --set train.epochs=2");

  auto* launchCmd = app.add_subcommand("launch", "Start N local ranks (torchrun environment) of CONFIG or COMMAND");
  trainer::LaunchOptions lo;
  launchCmd->add_option("-n,--nproc", lo.nprocs, "Number of ranks")->required()->check(CLI::Range(1, 1024));
  launchCmd->add_option("--master-port", lo.masterPort, "Rendezvous port (default: a free one)");
  std::string netSpec;
  launchCmd->add_option("--net", netSpec,
                        "Emulated network (root): a rate in Mbit/s, 'unshaped', or a schedule 'SECONDS:RATE,...' "
                        "or in epochs 'EPOCHe:RATE,...' (e.g. 0e:50,2e:10; overrides the config's network block)");
  // Everything from the first positional on (CONFIG.yaml and its train options
  // such as --resume and --set, or a COMMAND and its arguments) is passed on
  // verbatim and in order: prefix_command stops parsing there.
  launchCmd->prefix_command();
  launchCmd->allow_extras();
  // After `--`, CLI11 hands the arguments to the parent app: accept them there
  // and reject them below for every subcommand but launch.
  app.allow_extras();
  launchCmd->footer("Target: CONFIG.yaml [--resume | --overwrite] [--set k=v ...]  (runs `gradzip train` on every "
                    "rank)\n"
                    "        COMMAND [ARGS...]                                   (any program; `--` before it is "
                    "optional)");

  auto* compare = app.add_subcommand("compare", "Run a comparison suite (arms x same setup) and print the TTA table");
  experiments::CompareArgs cmpArgs;
  compare->add_option("suite", cmpArgs.suite, "Suite YAML")->required()->check(CLI::ExistingFile);
  compare->add_option("--only", cmpArgs.only, "Run only these arms");
  compare->add_flag("--rerun", cmpArgs.rerun, "Rerun arms that finished before");
  compare->add_flag("!--no-reuse", cmpArgs.reuse,
                    "Train every arm here rather than copy a finished run of the same config and executable from "
                    "another suite under out_dir");
  compare->add_flag("--dry-run", cmpArgs.dryRun, "Parse the suite and every run's config, print the plan, train nothing");

  auto* simulate = app.add_subcommand(
      "simulate", "Predict step time, TTA and the controller's plan for N = 2..1024 from a `compress: auto` run");
  trainer::SimulateArgs simArgs;
  simulate->add_option("run", simArgs.run, "Run directory of a `compress: auto` run")->required()->check(CLI::ExistingDirectory);
  simulate->add_option("--workers", simArgs.workers, "Worker counts")->capture_default_str();
  simulate->add_option("--mbit", simArgs.mbit, "Bandwidth in Mbit/s (default: the run's probe)");
  simulate->add_option("--latency-ms", simArgs.latencyMs, "Latency α in ms (default: the run's probe)");
  simulate->add_option("--time-weight", simArgs.timeWeight,
                       "Knee preference in [0, 1] (1: fastest) (default: the run's compress.time_weight)");
  simulate->add_option("--validate", simArgs.validate,
                       "Other `auto` runs whose measured step times and times to target to predict")
      ->check(CLI::ExistingDirectory);
  simulate->add_option("--targets", simArgs.targets,
                       "Accuracy targets (default: the run config's train.targets; a suite's runs need them here)");
  simulate->add_option("--out", simArgs.out, "Also write the report (markdown) here");

  auto* bench = app.add_subcommand("bench", "Microbenchmarks");
  bench->require_subcommand(1);
  auto* benchColl = bench->add_subcommand("collectives",
                                          "Ring/tree/PS all-reduce vs c10d Gloo all-reduce (run under launch)");
  experiments::BenchCollectivesArgs bcArgs;
  benchColl->add_option("--min-bytes", bcArgs.minBytes, "Smallest message")->capture_default_str();
  benchColl->add_option("--max-bytes", bcArgs.maxBytes, "Largest message")->capture_default_str();
  benchColl->add_option("--repeats", bcArgs.repeats, "Timed repetitions per size")->capture_default_str();
  benchColl->add_option("--out", bcArgs.out, "Append results (JSON lines) to this file");

  auto* benchComp = bench->add_subcommand("compressors", "Encode+decode throughput vs memcpy, vNMSE, bits/coord");
  experiments::BenchCompressorsArgs bpArgs;
  benchComp->add_option("--compressors", bpArgs.compressors, "Names (default: all)");
  benchComp->add_option("--min-log2", bpArgs.minLog2, "Smallest d = 2^k")->capture_default_str();
  benchComp->add_option("--max-log2", bpArgs.maxLog2, "Largest d = 2^k")->capture_default_str();
  benchComp->add_option("--repeats", bpArgs.repeats, "Timed repetitions")->capture_default_str();
  benchComp->add_option("--out", bpArgs.out, "Append results (JSON lines) to this file");
  benchComp->add_option("--simd", bpArgs.simd, "Cap the kernels' SIMD tier: portable, avx2 or avx512 (default: the CPU's)");
  benchComp->add_option("--device", bpArgs.device,
                        "cpu, or cuda: codecs on the GPU against a device-to-device copy (--out a file of its own, "
                        "e.g. experiments/results/gpu_compressors.jsonl)")
      ->capture_default_str();

  auto* benchNoise = bench->add_subcommand("noise", "Write C_nat's noise stream to stdout (for PractRand: RNG_test stdin32)");
  experiments::BenchNoiseArgs bnArgs;
  benchNoise->add_option("--seed", bnArgs.seed, "Stream seed (the run seed with --blocks-per-seed)")->capture_default_str();
  benchNoise->add_option("--blocks-per-seed", bnArgs.blocksPerSeed,
                         "0: one stream; N: N blocks of each training step's stream, steps 0, 1, ..")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  benchNoise->add_option("--bytes", bnArgs.bytes, "Stop after this many bytes (0: when stdout closes)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  auto* benchProbe = bench->add_subcommand("probe", "Fit latency α and bandwidth β by ping-pong (run under launch)");
  experiments::BenchProbeArgs prArgs;
  benchProbe->add_option("--out", prArgs.out, "Append the result (JSON line) to this file");

  auto* benchTrain = bench->add_subcommand("train", "Single-worker training throughput of the models (samples/s)");
  experiments::BenchTrainArgs btArgs;
  benchTrain->add_option("--models", btArgs.models, "Model names")->capture_default_str();
  benchTrain->add_option("--steps", btArgs.steps, "Timed steps")->capture_default_str();
  benchTrain->add_option("--warmup", btArgs.warmup, "Warm-up steps")->capture_default_str();
  benchTrain->add_option("--batch", btArgs.batch, "Batch size")->capture_default_str();
  benchTrain->add_option("--seq-len", btArgs.seqLen, "BERT sequence length")->capture_default_str();
  benchTrain->add_option("--threads", btArgs.threads, "Intra-op threads")->capture_default_str();
  benchTrain->add_option("--out", btArgs.out, "Append results (JSON lines) to this file");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      if (const auto msg = unknownSubcommand(app); !msg.empty()) {
        std::cerr << msg << "\nRun with --help for more information.\n";
        return static_cast<int>(CLI::ExitCodes::ExtrasError);
      }
    }
    return app.exit(e);
  }
  // c10d logs each failed connection attempt with a C++ backtrace before the
  // rendezvous gives up; the CommError that follows names the cause in one
  // line. Keep c10's own log to fatal messages unless the user asks for
  // debug output or sets TORCH_CPP_LOG_LEVEL.
  if (!std::getenv("TORCH_CPP_LOG_LEVEL") && logLevel != "debug" && logLevel != "trace") FLAGS_caffe2_log_level = 3;
  if (!launchCmd->parsed() && !app.remaining().empty()) {
    std::cerr << "The following arguments were not expected: " << fmt::format("{}", fmt::join(app.remaining(), " "))
              << "\nRun with --help for more information.\n";
    return 109;  // CLI11's exit code for extras
  }

  int rank = 0, world = 1;
  if (const char* r = std::getenv("RANK")) rank = std::atoi(r);
  if (const char* w = std::getenv("WORLD_SIZE")) world = std::atoi(w);
  try {
    initLogging(rank, world, logLevel);
    // Every compressor of this process on the device-generic path (compress/CodecPath.h).
    if (const char* path = std::getenv("GRADZIP_CODEC_PATH"))
      compress::setDefaultCodecPath(compress::parseCodecPath(path, "GRADZIP_CODEC_PATH"));
#ifdef GRADZIP_HAVE_CUDA
    comm::registerNcclBackend();
#endif
    if (*version) {
      std::cout << "gradzip " << GRADZIP_VERSION << " (LibTorch " << GRADZIP_TORCH_VERSION << ")\n";
      return 0;
    }
    if (*configCmd) {
      std::cout << trainer::configReference();
      return 0;
    }
    if (*train) return trainer::trainCommand(trainArgs);
    if (*launchCmd) {
      std::vector<std::string> target = launchCmd->remaining();
      if (target.empty()) target = app.remaining();  // everything after `--`
      if (!target.empty() && target.front().rfind("-", 0) == 0)
        throw UserError(fmt::format("launch: unknown option {} (see gradzip launch --help)", target.front()));
      if (target.empty()) throw UserError("launch: give a CONFIG.yaml or a COMMAND to start on every rank");
      std::optional<comm::NetEmulatorOptions> net;
      if (looksLikeConfig(target.front())) {
        lo.command = {selfExe(), "--log-level", logLevel, "train"};
        lo.command.insert(lo.command.end(), target.begin(), target.end());
        // The config's network block (after its --set overrides) is the launcher's to set up.
        std::vector<std::string> overrides;
        for (size_t i = 1; i < target.size(); ++i) {
          if (target[i] == "--set" && i + 1 < target.size()) overrides.push_back(target[++i]);
          else if (target[i].rfind("--set=", 0) == 0) overrides.push_back(target[i].substr(6));
        }
        net = trainer::TrainConfig::load(target.front(), overrides).network;
      } else {
        lo.command = target;
        if (lo.command.front() == "gradzip") lo.command.front() = selfExe();
      }
      if (!netSpec.empty()) {
        if (!net) net = comm::NetEmulatorOptions{};
        net->schedule = comm::RateSchedule::parse(netSpec);
      }
      return trainer::launchOn(lo, net).status;
    }
    if (*compare) return experiments::compareCommand(cmpArgs, selfExe());
    if (*simulate) return trainer::simulateCommand(simArgs);
    if (*benchColl) return experiments::benchCollectives(bcArgs);
    if (*benchComp) return experiments::benchCompressors(bpArgs);
    if (*benchNoise) return experiments::benchNoise(bnArgs);
    if (*benchProbe) return experiments::benchProbe(prArgs);
    if (*benchTrain) return experiments::benchTrain(btArgs);
  } catch (const CommError& e) {
    spdlog::error("{}", e.what());
    return 3;
  } catch (const UserError& e) {
    spdlog::error("{}", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave cannot be used (permissions, a full disk): theirs
    // to fix, not a bug; the message names the path and the reason.
    spdlog::error("{}", e.what());
    return 2;
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 70;
  }
  return 0;
}
