// Implements models/Mlp.h.
#include "models/Mlp.h"

#include "util/Error.h"

#include <torch/nn/modules/container/modulelist.h>

namespace gradzip::models {

Mlp::Mlp(const ModelOptions& options) : Model(options.name), inputSize_(options.mlp.inputSize) {
  std::vector<int64_t> widths = {inputSize_};
  widths.insert(widths.end(), options.mlp.hidden.begin(), options.mlp.hidden.end());
  widths.push_back(options.numClasses);
  torch::nn::ModuleList list;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    torch::nn::Linear l(widths[i], widths[i + 1]);
    list->push_back(l);
    layers_.push_back(l);
  }
  register_module("layers", list);
}

at::Tensor Mlp::forward(const at::Tensor& input) {
  int64_t features = 1;
  for (int64_t d = 1; d < input.dim(); ++d) features *= input.size(d);
  GZ_CHECK(input.dim() >= 2 && features == inputSize_,
           "model 'mlp' expects [B, ...] with mlp.input_size = {} features per sample, got {}", inputSize_,
           shapeOf(input));
  at::Tensor x = input.flatten(1);
  for (size_t i = 0; i < layers_.size(); ++i) {
    x = layers_[i]->forward(x);
    if (i + 1 < layers_.size()) x = at::relu(x);
  }
  return x;
}

}  // namespace gradzip::models
