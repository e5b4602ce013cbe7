// Implements controller/RecentSteps.h.
#include "controller/RecentSteps.h"

#include "controller/ControllerDetail.h"

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h

void RecentSteps::add(const StepMeasure& m, double comm, const CompressionStats& stats, const SyncedBuckets& sync) {
  if (steps_.size() < kRecentCap) {
    steps_.push_back(m);
    addTimings(sync, timings_);
    commSum_ += comm;
    stepSum_ += m.step;
  }
  stats_ += stats;
}

void RecentSteps::clear() {
  steps_.clear();
  timings_.clear();
  stats_ = {};
  commSum_ = stepSum_ = 0;
}

void RecentSteps::addTimings(const SyncedBuckets& sync, OverlapTimings& into) {
  // Every step: the scratch vectors keep their capacity (no allocation).
  auto& [handover, busy, work] = scratch_;
  handover.clear();
  busy.clear();
  work.clear();
  for (int k = 0; k < sync.numBuckets(); ++k) {
    const auto& bd = sync.lastBreakdown(k);
    handover.push_back(bd.handover);
    busy.push_back(bd.busy);
    work.push_back(bd.encode + bd.communicate + bd.decode);
  }
  into.add(handover, busy, work, sync.lastBackwardEnd());
}

}  // namespace gradzip::trainer
