// Implements controller/OverlapModel.h.
#include "controller/OverlapModel.h"

#include "util/Error.h"

#include <algorithm>

namespace gradzip::trainer {

double exposedSync(std::span<const double> handover, std::span<const double> work, double backwardEnd) {
  GZ_CHECK(handover.size() == work.size(), "overlap model: {} handover times for {} buckets", handover.size(),
           work.size());
  double finish = 0;
  for (size_t k = 0; k < work.size(); ++k) finish = std::max(finish, handover[k]) + work[k];
  return std::max(0.0, finish - backwardEnd);
}

void OverlapTimings::clear() {
  handover_.clear();
  overhead_.clear();
  busy_.clear();
  backwardEnd_ = 0;
  steps_ = 0;
}

void OverlapTimings::add(std::span<const double> handover, std::span<const double> busy,
                         std::span<const double> work, double backwardEnd) {
  GZ_CHECK(handover.size() == busy.size() && busy.size() == work.size(),
           "overlap timings: {} handovers, {} busy and {} work times", handover.size(), busy.size(), work.size());
  if (steps_ == 0 || handover_.size() != handover.size()) {
    clear();
    handover_.assign(handover.size(), 0.0);
    overhead_.assign(handover.size(), 0.0);
    busy_.assign(handover.size(), 0.0);
  }
  for (size_t k = 0; k < handover.size(); ++k) {
    handover_[k] += handover[k];
    overhead_[k] += std::max(0.0, busy[k] - work[k]);
    busy_[k] += busy[k];
  }
  backwardEnd_ += backwardEnd;
  ++steps_;
}

double OverlapInputs::exposed(std::span<const double> largeWork) const {
  GZ_CHECK(largeWork.size() == large.size(), "overlap model: work for {} buckets, {} controlled", largeWork.size(),
           large.size());
  if (handover.empty()) {
    double sum = 0;
    for (double w : largeWork) sum += w;
    return sum;
  }
  GZ_CHECK(overhead.size() == handover.size() && busy.size() == handover.size(),
           "overlap model: {} handovers, {} overheads, {} busy times", handover.size(), overhead.size(), busy.size());
  std::vector<double> work = busy;
  for (size_t j = 0; j < large.size(); ++j) {
    const auto k = size_t(large[j]);
    GZ_CHECK(k < work.size(), "overlap model: bucket {} of {}", k, work.size());
    work[k] = overhead[k] + largeWork[j];
  }
  return exposedSync(handover, work, backwardEnd);
}

OverlapInputs OverlapTimings::inputs(std::vector<int> large) const {
  OverlapInputs in;
  in.large = std::move(large);
  if (steps_ == 0) return in;
  const double n = double(steps_);
  for (size_t k = 0; k < handover_.size(); ++k) {
    in.handover.push_back(handover_[k] / n);
    in.overhead.push_back(overhead_[k] / n);
    in.busy.push_back(busy_[k] / n);
  }
  in.backwardEnd = backwardEnd_ / n;
  return in;
}

}  // namespace gradzip::trainer
