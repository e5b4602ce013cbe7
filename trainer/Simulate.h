// `gradzip simulate`: what the controller would do beyond this machine. From a
// `compress: auto` run's decision log (trainer/Controller.h) it takes the
// measured step time without communication, every candidate plan's measured
// encode+decode seconds and statistics, and the buckets; with the α-β cost
// model (trainer/PlanCost.h) at a given bandwidth and latency it predicts each
// candidate's step time for N = 2 .. 1024 workers, the plan the controller's
// knee would pick, and the time to each target the run reached (its step count
// to the target times the predicted step time: the weak-scaling assumption
// that per-worker batch and steps to target do not change with N).
// Validation: for other `auto` runs (e.g. N = 2 and 4 on emulated links), the
// step time predicted for each plan they settled on, from their probed α, β,
// world size and compute time, against the step time they then measured (the
// decision log's follow-up records).
#pragma once

#include "comm/CostModel.h"
#include "trainer/ControllerOptions.h"
#include "trainer/OverlapModel.h"
#include "trainer/Plan.h"
#include "trainer/Pareto.h"

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
  // The last decision's overlap inputs (trainer/OverlapModel.h); empty
  // (nothing overlaps) in logs written before it.
  OverlapInputs overlap;
  std::vector<CandidateProfile> candidates;
  // The knee's options (time_weight, knee, time_tolerance): the run's config when it has one.
  ControllerOptions controller;
  // target -> (step, train seconds) of the first evaluation that reached it.
  std::map<double, std::pair<int64_t, double>> reached;
  // Follow-up records: the plan a decision chose and its then-measured step,
  // split into base and exposed sync (NaN in logs written before a145a19).
  struct Followup {
    Plan plan;
    double measuredStep = 0, baseStep = 0;
    double measuredBase = NAN, measuredExposed = NAN;
    comm::NetworkParams net;
    OverlapInputs overlap;  // its decision's
  };
  std::vector<Followup> followups;
};

// Reads dir/decisions.jsonl (the last decision's network, base step and
// buckets; each candidate from the latest decision that screened it), dir/config.yaml
// and dir/tta.jsonl. UserError naming the file when a piece is missing, e.g.
// the run was not `compress: auto` or never decided.
RunProfile loadRunProfile(const std::string& dir);

// base + the exposed part (trainer/OverlapModel.h, `overlap` or else the
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
  std::string out;          // also write the report (markdown) here
};
int simulateCommand(const SimulateArgs& args);

}  // namespace gradzip::trainer
