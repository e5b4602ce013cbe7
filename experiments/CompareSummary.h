// The time-to-accuracy summary of a `gradzip compare` suite (experiments/
// Compare.h): per run directory, the figures a TTA log (trainer/TtaLog.h)
// yields; per arm, their aggregate over the suite's repeats; and the markdown
// table and JSON written as summary.md / summary.json. The figures follow the
// end-to-end-utility paper: time to each target, utility = speedup over FP16,
// speedup over FP32, final metric, targets never reached, bits per coordinate,
// compression and exposed-communication shares of step time, and the comm-free
// bound (the same steps with the communication cost removed).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gradzip::experiments {

// One run (one arm, one repeat), from its tta.jsonl.
struct RunStats {
  bool ok = false;  // the log has at least one row
  std::string plan;
  std::vector<std::optional<double>> timeToTarget;  // training seconds, per target
  // The training seconds at that row minus the communication cost so far
  // (Σ per-step min(step, exposed + encode + decode) over the steps covered).
  std::vector<std::optional<double>> commFreeToTarget;
  double finalMetric = NAN, trainSeconds = 0, commFreeSeconds = 0;
  int64_t steps = 0, bytes = 0;
  // Per-step means over all steps (each row weighted by the steps it covers).
  double step = 0, compute = 0, exposed = 0, encode = 0, decode = 0, dataWait = 0, optimizer = 0;
  // A PyTorch DDP peer ("ddp-..." plan): it does not split communication out
  // of compute, so exposed/encode/decode are unknown, not zero.
  bool ddp = false;
  // vNMSE of the compression: the rows' `vnmse` (each a ratio over the steps
  // measured since the previous row), averaged over the rows that carry one,
  // each weighted by the measured steps it covers; vnmseSteps = that weight's
  // total (0 and NaN: no row carries it, e.g. a DDP peer).
  double vnmse = NAN;
  int64_t vnmseSteps = 0;
  // Non-empty when the run stopped early (compare's RUN_DIR/failed, e.g.
  // "exit status 2"): its rows are what it logged before.
  std::string failure;
};

// The trainer measures compression every kVnmseEvery-th step (0-based step %
// kVnmseEvery == 0; trainer/Trainer.cpp), and every step under the controller.
inline constexpr int64_t kVnmseEvery = 10;

// Reads dir/tta.jsonl (a missing file gives ok = false). The metric is
// `accuracy`, else `mlm_accuracy`. A run with dir/decisions.jsonl ran the
// controller, so every one of its steps counts as measured for vNMSE.
RunStats readRun(const std::string& dir, const std::vector<double>& targets);

// An arm's repeats (one RunStats each, in repeat order; some may be !ok).
struct ArmStats {
  std::string name;
  // The plan the arm was configured with, shown when its TTA rows carry none.
  std::string configuredPlan;
  std::vector<RunStats> runs;
  int64_t parameters = 0;  // model parameters (0 = unknown): bits per coordinate
};

struct SummaryInput {
  std::string title;  // e.g. "quickstart (2 ranks, network 20 Mbit/s)"
  std::vector<double> targets;
  std::vector<ArmStats> arms;  // must include "fp16" and "fp32" to report utility
};

// summary.md: a table with one row per arm, then footnotes saying what each
// column means.
std::string summaryMarkdown(const SummaryInput& in);
// summary.json: a list with one object per arm (keys documented in
// experiments/README.md), each carrying `targets`.
nlohmann::json summaryJson(const SummaryInput& in);

}  // namespace gradzip::experiments
