// The options of the MOO controller (`compress: auto`): which plans it may
// choose from, how it measures them, when it re-decides and how it trades
// time against statistical cost. Defaults follow the flexible-communication
// paper (§3-E, DIGEST.md §5: TopK ratios [0.1, 0.033, 0.011, 0.004, 0.001],
// re-decision on a 10% gain drift) and the end-to-end-utility paper (FP16
// first). Where a default was measured rather than taken from a paper, its
// comment names the section of experiments/results/controller_ablation.md
// ("ablation" below) that holds the measurement; docs/controller.md explains
// the algorithm and `gradzip config --reference` lists every key.
//
//   compress: auto                      # all defaults
//   compress: {name: auto, families: [fp16, topkc, thc], time_weight: 0.85}
//   compress: {name: auto, pin: {name: thc, collective: ps}}  # measure and log, never switch
#pragma once

#include "comm/NetworkProbe.h"
#include "controller/Pareto.h"
#include "sync/Plan.h"
#include "util/Yaml.h"

#include <optional>
#include <string>
#include <vector>

namespace gradzip::trainer {

inline constexpr double kDefaultEfRateScale = 0.03;  // ControllerOptions::efRateScale

// topk{ratio: 0.001}@allgather: ControllerOptions::sparseStartPlan's default.
Plan defaultSparseStartPlan();

struct ControllerOptions {
  // --- The candidates (controller/Candidates.h): each family expands into its
  // parameter grid below, times every collective its capabilities allow.
  // gradiveq may be listed but is no default: a bucket switching to it starts
  // its warm-up schedule, so its screened cost is not the plan's it becomes.
  std::vector<std::string> families = {"fp32", "fp16", "bf16", "topk", "topkc", "artopk", "thc", "cnat", "powersgd"};
  std::vector<std::string> collectives;  // empty: every collective a compressor supports
  std::vector<double> ratios = {0.1, 0.033, 0.011, 0.004, 0.001};  // topk `ratio`, artopk `cr` (paper)
  std::vector<double> topkcBits = {0.5, 2, 8};                     // HotNets Fig. 1 budgets
  std::vector<int64_t> thcBits = {2, 4, 8};  // the parameter-server form (THC paper Alg. 1-3)
  // The all-reduce form (end-to-end-utility paper §3.2.2, b = q, saturating);
  // 2 bits is left out because its single-worker screening cannot see the
  // saturating sum (ablation, "THC all-reduce at 4 bits alone").
  std::vector<int64_t> thcAllReduceBits = {4};
  // Rank 1 is left out: its screened vNMSE under-charges the steps it costs
  // (ablation, "Without PowerSGD rank 1").
  std::vector<int64_t> powersgdRanks = {4, 16};

  // --- The knee (controller/Pareto.h kneePoint).
  // Weight on time; above 0.5 because vNMSE overstates what error-feedback
  // compression costs in steps (ablation, "A statistical cost from the
  // error-feedback bound").
  double timeWeight = 0.85;
  std::string knee = "relative";  // Pareto.h KneeScale: relative | minmax | log
  // A plan within (1 + ε) of one with clearly lower statistical cost is not
  // taken for that saving: ε is the cost model's median step error
  // (ablation, "`time_tolerance` 0.04").
  double timeTolerance = 0.04;
  // Statistical cost (statisticalCost below): ef_rate | vnmse | gain | ef.
  // The YAML default follows the optimizer (defaultStat); `gain` is refused
  // next to unbiased quantisers, for which gain = 1 + vNMSE > 1.
  std::string stat = "ef_rate";
  // ef_rate's k, the bound's 8γL: the middle of the range in which the
  // replayed decisions take the plan their runs favour (ablation,
  // "`ef_rate_scale` 0.03").
  double efRateScale = kDefaultEfRateScale;
  // Where the statistical cost is measured (the trainer's OptimizerGeometry):
  // optimizer (the update's geometry) | gradient.
  std::string geometry = "optimizer";

  // --- Screening (rank 0, on the last local gradient).
  // Replays that screen an error-feedback codec: its statistics are the last
  // replay's, an estimate of the steady state (ablation, "Screening the
  // steady state").
  int64_t screenReps = 8;
  // Threads rank 0 screens codecs on; the statistics do not depend on it
  // (ablation, "Screening on two threads, during the soundings").
  int64_t screenThreads = 2;

  // --- The warm-up.
  // Steps on `initial` before the first decision (ablation, "the first
  // decision at step 10").
  int64_t warmupSteps = 10;
  // After this step the warm-up leaves `initial` for the knee of the
  // predicted front unless `initial` is within explore_margin of it (0 or
  // >= warmup_steps: off; ablation, "A provisional plan for the warm-up").
  int64_t provisionalStep = 2;
  // The steps before the provisional step measured and are undone when it
  // leaves `initial` (ablation, "Undoing the warm-up's fp16 steps").
  bool provisionalRewind = true;
  // Where the start-up probe predicts `initial`'s sync above this many
  // seconds a step, the measuring steps run sparse_start_plan (needs
  // provisional_rewind; 1e9: never; ablation, "A sparse start and a
  // pipelined trigger check").
  double sparseStartAbove = 0.1;
  Plan sparseStartPlan = defaultSparseStartPlan();

  // --- Exploration (a race from an in-memory snapshot).
  // Steps per explored candidate, the first untimed (the paper uses 10).
  int64_t exploreSteps = 6;
  // Timed steps before a losing candidate may stop early (0: never; ablation,
  // "Exploration as a race").
  int64_t exploreMinSteps = 2;
  int64_t explore = 3;  // candidates from the predicted front explored per decision
  // A candidate is explored only if, predicted this much slower, it would
  // still replace the running plan: the cost model's error on measured runs.
  double exploreMargin = 0.05;
  // Measured plans are compared on one forward+backward where no sync
  // overlaps backward (ablation, "Plans measured on one base").
  bool commonBase = true;

  // --- Triggers (controller/Triggers.h).
  // Steps between trigger checks; each is a small pipelined broadcast
  // (ablation, "A sparse start and a pipelined trigger check").
  int64_t checkEvery = 1;
  int64_t minInterval = 200;     // steps between a decision and the next gain-triggered one
  int64_t networkInterval = 30;  // ... and the next network- or step-time-triggered one
  double gainDrift = 0.10;       // relative change of the smoothed gain that re-decides (paper: 10%)
  // Plans a gain decision may move to: family (the running compressor's
  // grid, as GraVAC) | all (ablation, "Gain decisions stay within the
  // running compressor").
  std::string gainScope = "family";
  double networkDrift = 0.30;  // relative change of observed/predicted communication time that re-decides
  // Bandwidth soundings while the running plan is latency-bound
  // (controller/BandwidthSounding.h): one timed all-reduce every sound_every
  // steps (0: never), at most sound_share of the steps' time.
  int64_t soundEvery = 50;
  double soundShare = 0.02;
  // Steps between gradient-noise-scale measurements (controller/GradientNoise.h,
  // for `gradzip simulate`; 0: never).
  int64_t noiseEvery = 20;
  // Steps after a decision whose mean step time is logged against its prediction.
  int64_t followupSteps = 20;

  // --- Plans outside the decision.
  int64_t smallBucketKb = 64;  // buckets below this stay on small_plan
  Plan smallPlan;              // fp16@engine
  Plan initial;                // fp16@engine: the baseline until the first decision
  std::optional<Plan> pin;     // pinned mode: run this plan, measure and log what auto would pick
  // The full α-β probe, where the collectives give no β; its budget also
  // bounds the short probes.
  comm::ProbeOptions probe;

  KneeScale kneeScale() const {
    return knee == "minmax" ? KneeScale::MinMax : knee == "log" ? KneeScale::Log : KneeScale::Relative;
  }
  // Pareto.h kneePoint of `points` under these options (time_weight, knee, time_tolerance).
  size_t kneeOf(const std::vector<Objectives>& points) const {
    return kneePoint(points, timeWeight, kneeScale(), timeTolerance);
  }

  // `optimizer` (OptimOptions::name) picks the default `stat` (defaultStat).
  static ControllerOptions fromYaml(YamlReader& r, const std::string& optimizer = "sgd");
  // ef_rate under SGD; vnmse under AdamW: ef_rate's bound is SGD's, and
  // error feedback under Adam loses it (Tang et al. 2021, "1-bit Adam", §3).
  static std::string defaultStat(const std::string& optimizer);
  YAML::Node toYaml() const;
};

// The statistical cost the knee trades against time, from a plan's vNMSE =
// ||x − C(x)||²/||x||² and gain = ||C(x)||²/||x||² (x: the compressor's input):
//   ef_rate: under error feedback k·(1 − δ)/δ², δ = 1 − vNMSE, k =
//            ef_rate_scale: EF-SGD's compression term relative to its noise
//            term (Karimireddy et al. 2019, Thm II); other plans: vNMSE
//            (QSGD, Alistarh et al. 2017, Thm 3.2);
//   vnmse:   vNMSE;
//   gain:    1/gain (flexible-communication paper §3-E, from GraVAC);
//            meaningful for sparsifiers only;
//   ef:      vNMSE/(1 − vNMSE) (Stich et al. 2018, Thm 2.4).
// Non-finite inputs give +infinity.
double statisticalCost(const std::string& stat, double vnmse, double gain, bool errorFeedback = false,
                       double efRateScale = kDefaultEfRateScale);
// The same under `o` for `plan` (its error-feedback flag matters only under
// ef_rate): the controller's and `gradzip simulate`'s one way to cost a plan.
double statisticalCost(const ControllerOptions& o, const Plan& plan, double vnmse, double gain);

}  // namespace gradzip::trainer
