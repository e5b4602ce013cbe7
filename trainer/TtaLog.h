// The time-to-accuracy log: one JSON line per evaluation (tta.jsonl) and the
// same row as CSV (tta.csv) in the run directory. Time is training wall-clock
// seconds with evaluation excluded (end-to-end-utility paper, rule 1).
#pragma once

#include <cmath>

#include <cstdint>
#include <fstream>
#include <map>
#include <string>

namespace gradzip::trainer {

// Seconds per step, averaged over the steps since the previous row.
struct StepBreakdown {
  double dataWait = 0, compute = 0, encode = 0, communicate = 0, decode = 0, exposed = 0, optimizer = 0, step = 0;
};

struct TtaRow {
  double trainSeconds = 0;
  int64_t step = 0;
  double epoch = 0;
  int64_t samples = 0;  // global samples seen
  // Mean of the finite training losses since the previous row; NaN when
  // every one was non-finite (written as null in JSON, nan in CSV).
  double loss = 0;
  std::map<std::string, double> metrics;  // evaluation metrics (accuracy, top5, mlm_loss, ...)
  double lr = 0;
  std::string plan;
  int64_t bytes = 0;  // cumulative payload bytes this rank sent
  int64_t saturated = 0;   // thc all-reduce: clipped coordinates so far (cumulative, like bytes)
  int64_t lossSpikes = 0;     // steps since the previous row whose loss was a spike (train.loss_spike_factor)
  int64_t skippedSteps = 0;     // steps since the previous row skipped for a non-finite gradient (nan_policy: skip)
  int64_t nonFiniteLosses = 0;  // steps since the previous row whose loss was NaN or Inf
  double residualNorm = 0;  // error feedback: ||e||₂ over all buckets at the row (0 without EF)
  // ||x_e − x_c||² / ||x_e||² of compression on rank 0, summed over the
  // sampled steps since the previous row (NaN: not measured).
  double vnmse = NAN;
  StepBreakdown breakdown;
};

class TtaLog {
 public:
  // Opens dir/tta.jsonl and dir/tta.csv. A fresh run (resumedStep < 0)
  // truncates them; a resumed run keeps the rows up to resumedStep and drops
  // later ones, which the killed run wrote after its last checkpoint and the
  // resumed run writes again.
  TtaLog(const std::string& dir, int64_t resumedStep);
  void write(const TtaRow& row);

 private:
  std::ofstream jsonl_, csv_;
  bool headerWritten_ = false;
};

}  // namespace gradzip::trainer
