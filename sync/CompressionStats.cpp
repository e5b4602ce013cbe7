// Implements sync/CompressionStats.h: the three squared norms of one
// measurement as dot products, per slot when weighted.
#include "sync/CompressionStats.h"

#include "util/Error.h"

namespace gradzip::trainer {

MeasuredCompression measureCompression(const torch::Tensor& input, const torch::Tensor& applied,
                                       const std::vector<compress::TensorSlot>& layout,
                                       const std::vector<double>& weights, torch::Tensor scratch) {
  GZ_ASSERT(weights.empty() || weights.size() == layout.size(), "{} weights for {} slots", weights.size(),
            layout.size());
  MeasuredCompression m;
  // Σ over the slots (over the whole bucket without weights) of dot(u, v),
  // into plain and, times the slot's weight, weighted.
  auto add = [&](const torch::Tensor& u, const torch::Tensor& v, double CompressionStats::*field) {
    if (weights.empty()) {
      m.plain.*field = at::dot(u, v).item<double>();
      return;
    }
    for (size_t j = 0; j < layout.size(); ++j) {
      const double d = at::dot(u.narrow(0, layout[j].offset, layout[j].numel),
                               v.narrow(0, layout[j].offset, layout[j].numel)).item<double>();
      m.plain.*field += d;
      m.weighted.*field += weights[j] * d;
    }
  };
  add(input, input, &CompressionStats::inputSq);
  add(applied, applied, &CompressionStats::appliedSq);
  const auto diff = scratch.defined() ? at::sub_out(scratch, input, applied)  // may overwrite input (then unused)
                                      : input - applied;
  add(diff, diff, &CompressionStats::errorSq);
  if (weights.empty()) m.weighted = m.plain;
  return m;
}

}  // namespace gradzip::trainer
