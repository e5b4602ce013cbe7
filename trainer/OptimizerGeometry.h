// The optimizer's geometry, for the controller's statistical cost: the
// per-coordinate factor by which the optimizer turns a gradient into an
// update. Compression error matters as far as it moves the update, not the
// gradient. For SGD (momentum, Nesterov, weight decay) the factor is one
// learning rate for every coordinate, so the vNMSE of the gradient is already
// the vNMSE of the update. For Adam and AdamW it is 1/(√v̂ + ε), with
// v̂ = v/(1 − β₂ᵗ) the bias-corrected second moment (Kingma & Ba 2015, Alg. 1;
// Loshchilov & Hutter 2019, Alg. 2, line 12): a coordinate with small
// gradients moves as far as one with large gradients, so a compressor that
// keeps the largest gradient entries (TopK, TopKC) loses far more of the
// update than of the gradient (measured on BERT-mini:
// experiments/results/kdoc_bert_mlm.md).
#pragma once

#include <torch/torch.h>

namespace gradzip::trainer {

// 1/(√v̂ + ε) for `param` under an Adam or AdamW optimizer (v̂ from
// max_exp_avg_sq under amsgrad), computed as their step() computes the
// denominator; undefined when the factor is the same for every coordinate
// (SGD) or the optimizer holds no state for `param` yet (before its first
// step).
torch::Tensor updateScale(const torch::optim::Optimizer& opt, const torch::Tensor& param);

}  // namespace gradzip::trainer
