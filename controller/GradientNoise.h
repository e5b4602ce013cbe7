// The gradient noise scale B_simple = tr(Σ)/|G|² (McCandlish, Kaplan, Amodei
// et al., "An Empirical Model of Large-Batch Training", 2018, §2.2 and App.
// A.1), measured where data parallelism gives it for free: each rank's
// gradient is a batch of b samples, their mean a batch of N·b. With |G_b|² the
// mean over ranks of their squared gradient norms and |G_Nb|² the squared norm
// of the mean, App. A.1's unbiased estimates are
//   |G|²   ≈ (N·b·|G_Nb|² − b·|G_b|²) / (N·b − b),
//   tr(Σ)  ≈ (|G_b|² − |G_Nb|²) / (1/b − 1/(N·b)),
// averaged separately over steps (their ratio per step is too noisy). The
// controller measures both norms on a shared random sample of the controlled
// buckets' coordinates (one small all-reduce: controller/Controller.h), and
// `gradzip simulate` (cli/Simulate.h) uses B_noise to carry a run's steps
// to a target to other batch sizes by §2.3's tradeoff (S/S_min − 1)(E/E_min
// − 1) = 1 with E = B·S examples and E_min = B_crit·S_min, taking B_crit ≈
// B_simple: S(B) = S_min·(1 + B_noise/B), so S(B') = S(B)·(1 +
// B_noise/B')/(1 + B_noise/B). The paper's model tunes the learning rate per
// batch size; a run that keeps it is an approximation, which `gradzip
// simulate --validate` measures.
#pragma once

#include "comm/Communicator.h"

#include <ATen/Tensor.h>

#include <array>
#include <cstdint>
#include <vector>

namespace gradzip::trainer {

// One step's estimates (App. A.1), from the ranks' mean squared norm
// `localSq` at batch `bSmall` and the squared norm of their mean `meanSq` at
// batch `bBig` > bSmall. Either may come out negative on one step.
struct NoiseEstimate {
  double gradSq = 0;  // |G|²
  double trace = 0;   // tr(Σ), per sample
};
NoiseEstimate estimateNoise(double localSq, double meanSq, double bSmall, double bBig);

// Collective: one step's estimates from every rank's gradient `local` (float32
// tensors, the same sizes on every rank, together d coordinates), each rank's
// a batch of `batch` samples. The squared norms are taken on kNoiseSample
// coordinates drawn uniformly (with replacement) from the stream `seed`,
// the same on every rank, and scaled by d/kNoiseSample: one all-reduce of
// kNoiseSample + 1 floats (`buffer` is reused across calls).
inline constexpr int64_t kNoiseSample = 2048;
NoiseEstimate measureNoise(comm::Communicator& comm, const std::vector<at::Tensor>& local, int64_t batch,
                           uint64_t seed, at::Tensor& buffer);

// Running means of the two estimates and their ratio.
class GradientNoise {
 public:
  void add(const NoiseEstimate& e);
  int64_t count() const { return count_; }
  // tr(Σ)/|G|² over the estimates so far: NaN before any, or while the mean
  // |G|² is not positive (the noise hides the gradient).
  double bSimple() const;
  // The running sums (Σ|G|², Σtr(Σ), count) and putting them back: the
  // controller checkpoints them, so a resumed run's B_simple goes on from the
  // estimates before the checkpoint rather than from none.
  std::array<double, 3> sums() const { return {gradSq_, trace_, double(count_)}; }
  void restore(const std::array<double, 3>& sums);

 private:
  double gradSq_ = 0, trace_ = 0;
  int64_t count_ = 0;
};

// §2.3's S(B) carried from batch `from` to `to`: steps·(1 + B_noise/to)/(1 +
// B_noise/from). A non-finite or negative bNoise leaves the steps as they are
// (the weak-scaling assumption).
double stepsAtBatch(double steps, double from, double to, double bNoise);

}  // namespace gradzip::trainer
