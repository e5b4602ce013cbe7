// The optimizer's geometry, for the controller's statistical cost: the factor
// by which the optimizer turns each tensor's gradient into its update.
// Compression error matters as far as it moves the update, not the gradient.
// For SGD (momentum, Nesterov, weight decay) the factor is one learning rate
// for every coordinate, so the vNMSE of the gradient is already the vNMSE of
// the update. Adam and AdamW divide each coordinate by √v̂ + ε, with
// v̂ = v/(1 − β₂ᵗ) the bias-corrected second moment (Kingma & Ba 2015, Alg. 1;
// Loshchilov & Hutter 2019, Alg. 2, line 12), so every tensor moves by about
// the learning rate per coordinate whatever the size of its gradients. A
// compressor that keeps the largest gradient entries (TopK, TopKC) then
// loses a tensor with small gradients from the gradient's energy, but not
// from the update's.
//
// The factor is per tensor, 1/(√mean(v̂) + ε), not per coordinate: weighting
// each coordinate by 1/(√v̂ᵢ + ε) charges any error on a coordinate whose
// gradients have been ~0 (an unused embedding row: √v̂ᵢ ≈ 0) up to 1/ε = 10⁸,
// so on BERT-mini every THC plan (its rotation spreads error over those rows)
// measured a vNMSE that priced it out, although THC trains that model as
// well as fp16 (experiments/results/controller.md,
// "Geometry"; the training in paper_hotnets_thc.md).
#pragma once

#include <torch/torch.h>

#include <optional>

namespace gradzip::trainer {

// 1/(√mean(v̂) + ε) over `param`'s coordinates under an Adam or AdamW
// optimizer (v̂ from max_exp_avg_sq under amsgrad, bias-corrected as their
// step() does); none when the factor is the same for every tensor (SGD) or the
// optimizer holds no state for `param` yet (before its first step).
std::optional<double> updateScale(const torch::optim::Optimizer& opt, const torch::Tensor& param);

}  // namespace gradzip::trainer
