// CompressionStats: what compression did to a gradient, as the squared norms
// of the error-fed input, of what entered the aggregate and of their
// difference, measured plainly and in the optimizer's update geometry. GradSync
// measures every bucket with it (sync/GradSync.h setMeasureCompression), and
// the controller's screening measures candidates it has not run.
#pragma once

#include "compress/Compressor.h"

#include <torch/torch.h>

#include <vector>

namespace gradzip::trainer {

// What compression did to one bucket's gradient on this rank, for the
// controller's statistical efficiency (flexible-communication paper §3-E, after
// GraVAC): with x_e the error-fed input (gradient + residual) and x_c this
// rank's contribution as it entered the aggregate (Aggregated::localApplied),
//   inputSq = ||x_e||², appliedSq = ||x_c||², errorSq = ||x_e − x_c||².
// gain = appliedSq / inputSq; vNMSE = errorSq / inputSq.
struct CompressionStats {
  double inputSq = 0, appliedSq = 0, errorSq = 0;
  CompressionStats& operator+=(const CompressionStats& o) {
    inputSq += o.inputSq;
    appliedSq += o.appliedSq;
    errorSq += o.errorSq;
    return *this;
  }
};

// What compression did, in both geometries: `plain`, the CompressionStats of
// `input` (x_e) against what entered the aggregate (`applied`, x_c), flat
// float32 buckets laid out as `layout`; `weighted`, the same with slot j's
// terms times weights[j] = s_j², s_j the optimizer's update factor of that
// tensor (trainer/OptimizerGeometry.h), so its ratios are the update's. Empty
// `weights`: weighted = plain. One pass of dot products per slot (per bucket
// without weights). `scratch`, when defined, is a float32 buffer of input's
// size that x_e − x_c is written to instead of a new tensor; `input` may alias
// it.
struct MeasuredCompression {
  CompressionStats plain, weighted;
};
MeasuredCompression measureCompression(const torch::Tensor& input, const torch::Tensor& applied,
                                       const std::vector<compress::TensorSlot>& layout,
                                       const std::vector<double>& weights, torch::Tensor scratch = {});

}  // namespace gradzip::trainer
