// Implements trainer/Optimizer.h over torch::optim.
#include "trainer/Optimizer.h"

namespace gradzip::trainer {

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const std::vector<torch::Tensor>& params,
                                                       const OptimOptions& o, double lr) {
  if (o.name == "adamw") {
    torch::optim::AdamWOptions a(lr);
    a.betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weightDecay);
    return std::make_unique<torch::optim::AdamW>(params, a);
  }
  torch::optim::SGDOptions s(lr);
  s.momentum(o.momentum).nesterov(o.nesterov).weight_decay(o.weightDecay);
  return std::make_unique<torch::optim::SGD>(params, s);
}

void setLearningRate(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

}  // namespace gradzip::trainer
