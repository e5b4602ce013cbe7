// Implements trainer/OptimizerGeometry.h from the optimizer's own state and
// its parameter group's options.
#include "trainer/OptimizerGeometry.h"

#include <cmath>

namespace gradzip::trainer {
namespace {

// The options of the parameter group that holds `param` (nullptr if none does).
const torch::optim::OptimizerOptions* groupOptions(const torch::optim::Optimizer& opt, const torch::Tensor& param) {
  for (const auto& g : opt.param_groups())
    for (const auto& p : g.params())
      if (p.unsafeGetTensorImpl() == param.unsafeGetTensorImpl()) return &g.options();
  return nullptr;
}

// 1/(√mean(v/(1 − β₂ᵗ)) + ε): Adam's and AdamW's denominator, on the
// tensor's root-mean-square second moment.
template <class State, class Options>
std::optional<double> adamScale(const State& s, const Options& o) {
  const auto& v = o.amsgrad() && s.max_exp_avg_sq().defined() ? s.max_exp_avg_sq() : s.exp_avg_sq();
  if (!v.defined() || s.step() < 1 || v.numel() == 0) return std::nullopt;
  const double correction2 = 1 - std::pow(std::get<1>(o.betas()), double(s.step()));
  const double rms = std::sqrt(v.to(torch::kDouble).mean().template item<double>() / correction2);
  return 1.0 / (rms + o.eps());
}

}  // namespace

std::optional<double> updateScale(const torch::optim::Optimizer& opt, const torch::Tensor& param) {
  const auto it = opt.state().find(param.unsafeGetTensorImpl());
  if (it == opt.state().end() || !it->second) return std::nullopt;
  const auto* options = groupOptions(opt, param);
  if (!options) return std::nullopt;
  if (const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(it->second.get()))
    if (const auto* o = dynamic_cast<const torch::optim::AdamWOptions*>(options)) return adamScale(*s, *o);
  if (const auto* s = dynamic_cast<const torch::optim::AdamParamState*>(it->second.get()))
    if (const auto* o = dynamic_cast<const torch::optim::AdamOptions*>(options)) return adamScale(*s, *o);
  return std::nullopt;
}

}  // namespace gradzip::trainer
