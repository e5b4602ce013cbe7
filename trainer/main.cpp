// The gradzip command line: train, launch, bench, version. This file sits on
// top of every module and nothing includes it. User errors print one clear line
// and exit 2; communication failures exit 3; bugs exit 70.
#include "comm/NcclBackend.h"
#include "comm/ProcessGroupCommunicator.h"
#include "experiments/Benchmarks.h"
#include "experiments/Compare.h"
#include "trainer/Commands.h"
#include "trainer/Simulate.h"
#include "trainer/EmulatedLaunch.h"
#include "trainer/TrainConfig.h"
#include "util/Allocator.h"
#include "util/Error.h"
#include "util/Log.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

using namespace gradzip;

namespace {

bool looksLikeConfig(const std::string& s) {
  auto ext = std::filesystem::path(s).extension().string();
  return ext == ".yaml" || ext == ".yml";
}

std::string selfExe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

}  // namespace

int main(int argc, char** argv) {
  retainFreedMemory();
  comm::configureProcessGroups();
  CLI::App app{"gradzip: compressed data-parallel training (LibTorch + c10d)", "gradzip"};
  app.require_subcommand(1);
  std::string logLevel = "info";
  app.add_option("--log-level", logLevel, "trace, debug, info, warn, error")->capture_default_str();

  auto* version = app.add_subcommand("version", "Print gradzip and LibTorch versions");

  auto* train = app.add_subcommand("train", "Train from a YAML config (one rank; use launch or torchrun for more)");
  trainer::TrainArgs trainArgs;
  train->add_option("config", trainArgs.config, "YAML config file")->required()->check(CLI::ExistingFile);
  train->add_flag("--resume", trainArgs.resume, "Continue from the run directory's last checkpoint");
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
  launchCmd->footer("Target: CONFIG.yaml [--resume] [--set k=v ...]  (runs `gradzip train` on every rank)\n"
                    "        COMMAND [ARGS...]                     (any program; `--` before it is optional)");

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

  CLI11_PARSE(app, argc, argv);
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
#ifdef GRADZIP_HAVE_CUDA
    comm::registerNcclBackend();
#endif
    if (*version) {
      std::cout << "gradzip " << GRADZIP_VERSION << " (LibTorch " << GRADZIP_TORCH_VERSION << ")\n";
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
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 70;
  }
  return 0;
}
