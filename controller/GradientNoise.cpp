// Implements controller/GradientNoise.h (McCandlish et al. 2018, App. A.1 and
// §2.3).
#include "controller/GradientNoise.h"

#include "compress/kernels/CounterRng.h"
#include "util/Error.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace gradzip::trainer {

NoiseEstimate estimateNoise(double localSq, double meanSq, double bSmall, double bBig) {
  GZ_ASSERT(bSmall > 0 && bBig > bSmall, "noise scale: batches {} and {}", bSmall, bBig);
  // E|G_B|² = |G|² + tr(Σ)/B for a batch of B samples: two batches, two unknowns.
  return {(bBig * meanSq - bSmall * localSq) / (bBig - bSmall), (localSq - meanSq) / (1 / bSmall - 1 / bBig)};
}

NoiseEstimate measureNoise(comm::Communicator& comm, const std::vector<at::Tensor>& local, int64_t batch,
                           uint64_t seed, at::Tensor& buffer) {
  GZ_ASSERT(comm.size() >= 2 && batch > 0, "noise scale: {} ranks, batch {}", comm.size(), batch);
  std::vector<const float*> data;
  std::vector<int64_t> ends;  // cumulative sizes
  int64_t d = 0;
  for (const auto& t : local) {
    GZ_ASSERT(t.scalar_type() == at::kFloat && t.is_contiguous(), "noise scale: float32 contiguous gradients");
    data.push_back(t.data_ptr<float>());
    ends.push_back(d += t.numel());
  }
  GZ_ASSERT(d > 0, "noise scale: no coordinates");
  if (!buffer.defined() || buffer.numel() != kNoiseSample + 1) buffer = torch::empty({kNoiseSample + 1}, torch::kFloat);
  float* v = buffer.data_ptr<float>();
  double sq = 0;
  for (int64_t i = 0; i < kNoiseSample; ++i) {
    const int64_t c = int64_t(compress::randomBits(seed, uint64_t(i)) % uint64_t(d));
    size_t j = 0;
    while (c >= ends[j]) ++j;
    v[i] = data[j][c - (j == 0 ? 0 : ends[j - 1])];
    sq += double(v[i]) * v[i];
  }
  v[kNoiseSample] = float(sq);
  comm.allReduce(buffer).wait();  // sums: Σ_r g_r on the sample, and Σ_r |g_r|²
  const double n = comm.size(), scale = double(d) / double(kNoiseSample);
  double meanSq = 0;
  for (int64_t i = 0; i < kNoiseSample; ++i) meanSq += (double(v[i]) / n) * (double(v[i]) / n);
  return estimateNoise(scale * double(v[kNoiseSample]) / n, scale * meanSq, double(batch), n * double(batch));
}

void GradientNoise::add(const NoiseEstimate& e) {
  if (!std::isfinite(e.gradSq) || !std::isfinite(e.trace)) return;
  gradSq_ += e.gradSq;
  trace_ += e.trace;
  ++count_;
}

void GradientNoise::restore(const std::array<double, 3>& sums) {
  GZ_CHECK(std::isfinite(sums[0]) && std::isfinite(sums[1]) && sums[2] >= 0 && sums[2] == std::floor(sums[2]),
           "gradient noise sums ({}, {}, {}) are not finite sums over a whole number of estimates", sums[0], sums[1],
           sums[2]);
  gradSq_ = sums[0];
  trace_ = sums[1];
  count_ = int64_t(sums[2]);
}

double GradientNoise::bSimple() const {
  if (count_ == 0 || !(gradSq_ > 0)) return std::numeric_limits<double>::quiet_NaN();
  return trace_ / gradSq_;
}

double stepsAtBatch(double steps, double from, double to, double bNoise) {
  if (!std::isfinite(bNoise) || bNoise < 0) return steps;
  return steps * (1 + bNoise / to) / (1 + bNoise / from);
}

}  // namespace gradzip::trainer
