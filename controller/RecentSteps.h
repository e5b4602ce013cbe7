// The running plan's steps since the last decision (or since it started): the
// measures a decision compares it by and predicts the others from (their
// base step, forward+backward and bucket timings for the overlap model), its
// compression statistics, and the seconds its collectives took.
#pragma once

#include "controller/Controller.h"
#include "controller/OverlapModel.h"
#include "sync/CompressionStats.h"
#include "sync/SyncedBuckets.h"

#include <span>
#include <vector>

namespace gradzip::trainer {

class RecentSteps {
 public:
  // One step `m` of the running plan, just synchronised by `sync`: its
  // measure, its buckets' timings and `comm` seconds of observed
  // collectives over the large buckets are kept for the first kRecentCap
  // steps; its statistics `stats` are summed over all of them.
  void add(const StepMeasure& m, double comm, const CompressionStats& stats, const SyncedBuckets& sync);
  void clear();

  bool empty() const { return steps_.empty(); }
  size_t size() const { return steps_.size(); }
  std::span<const StepMeasure> steps() const { return steps_; }
  const OverlapTimings& timings() const { return timings_; }
  const CompressionStats& stats() const { return stats_; }
  // Σ step seconds and Σ observed communication seconds over steps().
  double stepSeconds() const { return stepSum_; }
  double commSeconds() const { return commSum_; }

  // Every bucket's handover, comm-thread seconds and encode + communicate +
  // decode of the step `sync` just synchronised, with its backward end, into
  // `into`.
  void addTimings(const SyncedBuckets& sync, OverlapTimings& into);

 private:
  std::vector<StepMeasure> steps_;
  OverlapTimings timings_;  // the buckets' timings over steps_
  CompressionStats stats_;
  double commSum_ = 0, stepSum_ = 0;
  struct {
    std::vector<double> handover, busy, work;
  } scratch_;  // addTimings' per-step buffers
};

}  // namespace gradzip::trainer
