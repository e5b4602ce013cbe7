// OverlapModel: how much of a step's gradient synchronisation shows in the
// step time when buckets are communicated during backward (sync/GradSync.h).
// One communication thread takes the buckets in index order, each once it has
// been handed over and the previous one is done, so bucket k finishes at
//   f_k = max(f_{k-1}, h_k) + w_k
// (h_k its handover after the step's start, w_k the thread's seconds on it),
// and the training thread, done with backward at T, waits max(0, f_last − T).
// This is the pipeline that wait-free backpropagation (Poseidon, Zhang et al.,
// USENIX ATC'17) and PyTorch DDP's gradient buckets (Li et al., VLDB'20)
// exploit; the flexible-communication paper's cost model (Eq. 4) charges the
// whole collective instead, which is the single-bucket case (h_0 = T). The
// controller predicts each candidate's step from it (controller/Screening.h).
// It leaves out the sync thread's work slowing a backward that shares the
// rank's core (experiments/results/controller_ablation.md, "Where THC's
// overlapped steps lose their time, measured").
#pragma once

#include <span>
#include <vector>

namespace gradzip::trainer {

// Seconds the training thread waits after backward ends at `backwardEnd`, for
// buckets handed over at `handover[k]` that keep the comm thread busy for
// `work[k]` seconds each (both measured from the step's start, equal sizes).
double exposedSync(std::span<const double> handover, std::span<const double> work, double backwardEnd);

// The pipeline's measured inputs, as a decision logs them ("overlap"): per
// bucket (all of them, in index order) its handover, the comm thread's
// seconds beyond the plan's own encode + communicate + decode (the
// finiteness check, copies, measuring: `overhead`) and in all (`busy`);
// which buckets the controller plans for (`large`); backward's end.
struct OverlapInputs {
  std::vector<double> handover, overhead, busy;
  std::vector<int> large;
  double backwardEnd = 0;
  // The exposed sync of a plan whose encode/decode + communication on the
  // large buckets take `largeWork[j]` (bucket large[j]), the other buckets as
  // measured. Without timings (handover empty): Σ largeWork, nothing
  // overlapping (the flexible-communication paper's Eq. 4 charge).
  double exposed(std::span<const double> largeWork) const;
};

// Per-bucket timings averaged over steps (handover, the comm thread's seconds
// beyond encode + communicate + decode, and backward's end), for the
// predictions of plans that have not run: add() a step's, mean*() them.
class OverlapTimings {
 public:
  void clear();
  // One step: per bucket its handover, the comm thread's busy seconds and its
  // encode + communicate + decode seconds; backward's end.
  void add(std::span<const double> handover, std::span<const double> busy, std::span<const double> work,
           double backwardEnd);
  bool empty() const { return steps_ == 0; }
  // The means (overhead: of busy − work, at least 0), with `large`; no
  // timings (handover empty) before the first add().
  OverlapInputs inputs(std::vector<int> large) const;

 private:
  std::vector<double> handover_, overhead_, busy_;
  double backwardEnd_ = 0;
  int64_t steps_ = 0;
};

}  // namespace gradzip::trainer
