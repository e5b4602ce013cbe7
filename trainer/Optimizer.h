// Builds the LibTorch optimizer named by OptimOptions (SGD with momentum,
// Nesterov and weight decay; AdamW) and sets its learning rate each step.
#pragma once

#include "trainer/OptimOptions.h"

#include <torch/torch.h>

#include <memory>

namespace gradzip::trainer {

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const std::vector<torch::Tensor>& params,
                                                       const OptimOptions& o, double lr);
void setLearningRate(torch::optim::Optimizer& opt, double lr);

}  // namespace gradzip::trainer
