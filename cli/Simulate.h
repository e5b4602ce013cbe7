// `gradzip simulate`: what the controller would do beyond this machine. From a
// `compress: auto` run's decision log (controller/Controller.h) it takes the
// measured step time without communication, every candidate plan's measured
// encode+decode seconds and statistics, and the buckets; with the α-β cost
// model (controller/PlanCost.h) at a given bandwidth and latency it predicts each
// candidate's step time for N = 2 .. 1024 workers, the plan the controller's
// knee would pick, and the time to each target the run reached: its step count
// to the target carried to N workers' global batch by the gradient noise
// scale the run measured until then (S(B) = S_min·(1 + B_noise/B),
// controller/GradientNoise.h; without `noise` records, as in logs before it,
// the steps stay as they are: weak scaling), times the predicted step time,
// plus the training time the run spent beyond its steps until then (the
// controller's probes, charged start and explorations). The pick's
// statistics choose it (the knee over predicted step and statistical cost,
// as the controller's) but do not rescale its steps: with error feedback the
// measured steps to a target stay close across plans, far closer than steps
// in proportion to 1 + the statistical cost (EF-SGD's bound, Karimireddy et
// al. 2019 Thm II: its noise term grows by 1 + 8γL(1 − δ)/δ², the ef_rate
// cost) or to 1/gain (the flexible-communication paper's charge) would make
// them. So a TTA carries the source run's steps, and errs by the difference
// in steps between its plan and the pick (experiments/results/simulate.md,
// "Steps are not rescaled").
// Validation: for other `auto` runs (e.g. N = 2 and 4 on emulated links), the
// step time predicted for each plan they settled on, from their probed α, β,
// world size and compute time, against the step time they then measured (the
// decision log's follow-up records); and for every target both runs reached,
// the time to it predicted the same way (the simulated run's steps to the
// target times the predicted step of the plan in force when the other run
// reached it) against the time that run took, warm-up, probes and
// explorations included.
#pragma once

#include "comm/CostModel.h"
#include "controller/ControllerOptions.h"
#include "controller/GradientNoise.h"
#include "controller/OverlapModel.h"
#include "sync/Plan.h"
#include "controller/Pareto.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace gradzip::trainer {

struct CandidateProfile {
  Plan plan;
  double encodeDecode = 0;  // seconds per step over the controlled buckets (measured)
  double stat = 0;          // the run's statistical cost (vNMSE or 1/gain)
  double bits = 0;          // wire bits per coordinate at the run's N, as screened (shape-aware)
};

struct RunProfile {
  std::string dir;
  int worldSize = 0;
  comm::NetworkParams net;  // the run's probe (or its last refit)
  double baseStep = 0;      // measured step time without waiting for communication
  std::vector<int64_t> buckets;  // coordinates of each controlled bucket
  // The last decision's overlap inputs (controller/OverlapModel.h); empty
  // (nothing overlaps) in logs written before it.
  OverlapInputs overlap;
  std::vector<CandidateProfile> candidates;
  // The knee's options (time_weight, knee, time_tolerance): the run's config when it has one.
  ControllerOptions controller;
  // The first evaluation that reached a target (the run config's
  // train.targets, or those given to loadRunProfile): its step, its training
  // time, and the part of that time that was not the steps' (train seconds −
  // Σ the logged mean step × the steps of each window: what the controller
  // charged; 0 when a row has no step breakdown).
  struct Reached {
    int64_t step = 0;
    double seconds = 0, overhead = 0;
  };
  std::map<double, Reached> reached;
  // The controller's `noise` records: samples per rank per step (0: none
  // logged) and each measurement's step and estimates.
  int64_t batch = 0;
  std::vector<std::pair<int64_t, NoiseEstimate>> noise;
  // B_noise from the measurements up to `step` (NaN without any).
  double noiseScale(int64_t step) const;
  // The steps to a target reached at `steps` here, at a global batch of
  // `globalBatch` samples a step (stepsAtBatch with noiseScale(steps)).
  double stepsAt(int64_t steps, double globalBatch) const;
  // Follow-up records: the plan a decision chose and its then-measured step,
  // split into base and exposed sync (NaN in logs of older builds).
  struct Followup {
    Plan plan;
    int64_t decisionStep = 0;  // the step of the decision it follows up
    double measuredStep = 0, baseStep = 0;
    double measuredBase = NAN, measuredExposed = NAN;
    comm::NetworkParams net;
    OverlapInputs overlap;  // its decision's
  };
  std::vector<Followup> followups;
};

// Reads dir/decisions.jsonl (the last decision's network, base step and
// buckets; each candidate from the latest decision that screened it), dir/config.yaml
// and dir/tta.jsonl (the first evaluation reaching each of `targets`, or of
// the config's train.targets when `targets` is empty: a suite's runs carry
// their targets in the suite file, not in their config). UserError naming the
// file when a piece is missing, e.g. the run was not `compress: auto` or never
// decided.
RunProfile loadRunProfile(const std::string& dir, const std::vector<double>& targets = {});

// base + the exposed part (controller/OverlapModel.h, `overlap` or else the
// run's last decision's) of encode/decode (split over the buckets by size)
// and, per bucket, a·α + m·β at n ranks, with the bits per coordinate as
// screened at the run's N plus how the compressor's formula changes from that
// N to n (shape-aware schemes such as PowerSGD know their layout only after a
// first encode, so the screened value is the exact one). Without overlap
// inputs: base + encode/decode + Σ a·α + m·β.
double predictStep(const RunProfile& p, const CandidateProfile& c, int n, const comm::NetworkParams& net,
                   double base, const OverlapInputs* overlap = nullptr);

struct SimulateArgs {
  std::string run;
  std::vector<int> workers = {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  double mbit = 0;          // > 0: this bandwidth instead of the run's probe
  double latencyMs = -1;    // >= 0: this latency instead of the run's probe
  double timeWeight = -1;   // in [0, 1]: this knee preference instead of the run's time_weight
  std::vector<std::string> validate;  // auto runs to check the predictions against
  std::vector<double> targets;        // accuracy targets (default: the run config's train.targets)
  std::string out;          // also write the report (markdown) here
};
int simulateCommand(const SimulateArgs& args);

}  // namespace gradzip::trainer
