// The time-to-accuracy summary of a `gradzip compare` suite (experiments/
// Compare.h): per run directory, the figures a TTA log (trainer/TtaLog.h)
// yields; per arm, their aggregate over the suite's repeats; and the markdown
// table and JSON written as summary.md / summary.json. The figures follow the
// end-to-end-utility paper: time to each target, utility = speedup over FP16,
// speedup over FP32, final metric, targets never reached, bits per coordinate,
// compression and exposed-communication shares of step time, and the comm-free
// bound (the same steps with the communication cost removed). A speedup that
// the evaluations or the step-time spread cannot resolve is marked as within
// noise (speedupOver), so that one seed's accuracy path is not sold as a
// faster plan.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
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
  // Per target: the training seconds of the evaluation before the one that
  // first reached it (0 when the first evaluation did). The metric crossed the
  // target somewhere in (targetWindowStart, timeToTarget]; nullopt where never.
  std::vector<std::optional<double>> targetWindowStart;
  // The training seconds at that row minus the communication cost so far
  // (Σ per-step min(step, exposed + encode + decode) over the steps covered).
  std::vector<std::optional<double>> commFreeToTarget;
  double finalMetric = NAN, trainSeconds = 0, commFreeSeconds = 0;
  int64_t steps = 0, bytes = 0;
  // Per-step means over all steps (each row weighted by the steps it covers).
  double step = 0, compute = 0, exposed = 0, encode = 0, decode = 0, dataWait = 0, optimizer = 0;
  // The step time's spread over the evaluation windows: the standard deviation
  // of the rows' mean step times around `step`, same weights (0 with one row).
  double stepSd = 0;
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
// kVnmseEvery == 0; trainer/TrainerImpl.h), and every step under the controller.
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

// Whether a speedup is a measured difference, checked in this order:
enum class Noise {
  kNone,
  // Some run of each arm first reached the target in evaluation windows
  // (targetWindowStart, timeToTarget] that overlap, pooled over repeats as
  // [min start, max time]: the evaluations (or the repeats' spread) cannot
  // say which arm got there first.
  kEvalInterval,
  // The windows are apart, but the mean step times differ by no more than the
  // two spreads added (stepSd, pooled over repeats) and one arm has a single
  // run: the gap is in steps to the target, i.e. one seed's accuracy path, not
  // faster steps.
  kStepTime,
};
const char* noiseName(Noise n);  // "none", "eval_interval", "step_time"

// TTA(base) / TTA(arm), means over their runs, at the highest target every run
// of both reached, with its noise verdict. nullopt when no target qualifies.
// An arm compared with itself is kNone.
struct Speedup {
  double ratio = NAN;
  size_t target = 0;  // index into the suite's targets
  Noise noise = Noise::kNone;
};
std::optional<Speedup> speedupOver(const ArmStats& arm, const ArmStats& base, size_t targets);

// summary.md: a table with one row per arm (every column), then footnotes
// saying what each column means and one line per speedup within noise.
std::string summaryMarkdown(const SummaryInput& in);
// The table a newcomer reads first (what `gradzip compare` prints): arm, plan,
// time to each target, speedup over FP16 and FP32 (marked † within noise),
// step time ± spread, bits per coordinate and final metric, then the same
// within-noise lines as summaryMarkdown.
std::string summaryBrief(const SummaryInput& in);
// summary.json: a list with one object per arm (keys documented in
// experiments/README.md), each carrying `targets`; `utility_vs_fp16_noise` and
// `speedup_vs_fp32_noise` hold noiseName (null without a speedup).
nlohmann::json summaryJson(const SummaryInput& in);

}  // namespace gradzip::experiments
