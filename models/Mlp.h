// A small multi-layer perceptron for tests and smoke runs: flatten, then
// Linear + ReLU for each hidden width, then Linear to the classes.
#pragma once

#include "models/Model.h"
#include "models/ModelOptions.h"

#include <torch/nn/modules/linear.h>

#include <vector>

namespace gradzip::models {

class Mlp : public Model {
 public:
  // Uses options.mlp and numClasses; PyTorch's default Linear initialisation.
  // Parameters: Σ over consecutive widths (w_in·w_out + w_out), widths =
  // [input_size, hidden..., num_classes].
  explicit Mlp(const ModelOptions& options);

  // [B, ...] with input_size features per sample (e.g. images [B, 1, 28, 28])
  // -> logits [B, numClasses].
  at::Tensor forward(const at::Tensor& input) override;
  ModelKind kind() const override { return ModelKind::kClassification; }

 private:
  int64_t inputSize_;
  std::vector<torch::nn::Linear> layers_;
};

}  // namespace gradzip::models
