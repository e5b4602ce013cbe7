// A BERT-style encoder with a masked-LM head (Devlin et al. 2019): token and
// learned position embeddings (no segment embeddings) summed and LayerNorm'd, N
// post-LN transformer encoder layers (multi-head self-attention with a padding
// mask, then a GELU MLP; each sub-layer is x = LN(x + Dropout(f(x))), Vaswani et
// al. 2017 §3.1), and the MLM head of BERT: dense + GELU + LayerNorm, then a
// decoder whose weight is TIED to the token embedding (Press & Wolf 2017) plus
// its own output bias. The tied weight is registered once (as the embedding), so
// parameters() lists it once and its gradient sums both uses.
//
// Parameter count with V = vocab_size, P = max_len, H = hidden, I = intermediate,
// N = layers:  V·H + P·H + 2H                          (embeddings + LN)
//            + N·(4H² + 4H + 2HI + I + H + 4H)          (QKV+out, FFN, two LNs)
//            + H² + H + 2H + V                          (MLM dense, LN, decoder bias)
#pragma once

#include "models/Model.h"
#include "models/ModelOptions.h"

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>

#include <memory>
#include <vector>

namespace gradzip::models {

namespace detail {
class BertLayer;  // one encoder layer, defined in Bert.cpp
class MlmHead;    // dense + GELU + LN and the decoder bias, defined in Bert.cpp
}  // namespace detail

class Bert : public Model {
 public:
  // Uses options.bert. Initialisation as BERT: every Linear and Embedding weight
  // normal(0, 0.02), biases 0, LayerNorm weight 1 and bias 0; LayerNorm eps 1e-12.
  explicit Bert(const ModelOptions& options);

  // token ids [B, T] (int64, 0 <= id < vocab_size, T <= max_len) -> logits
  // [B, T, vocab_size] at every position, no padding.
  at::Tensor forward(const at::Tensor& input) override;
  // As forward, with attentionMask [B, T]: nonzero/true = real token; padded
  // positions are never attended to (their own outputs are meaningless). Every
  // sequence needs at least one real token: an all-padding row has nothing to
  // attend to and its logits are NaN.
  at::Tensor forwardMasked(const at::Tensor& input, const at::Tensor& attentionMask) override;
  ModelKind kind() const override { return ModelKind::kMaskedLm; }

  // The token embedding [V, H], which is also the MLM decoder's weight (tied).
  const at::Tensor& tokenEmbeddingWeight() const { return tokenEmbedding_->weight; }
  const at::Tensor& decoderWeight() const { return tokenEmbedding_->weight; }
  const at::Tensor& decoderBias() const;
  const BertOptions& options() const { return options_; }

 private:
  BertOptions options_;
  torch::nn::Embedding tokenEmbedding_{nullptr};
  torch::nn::Embedding positionEmbedding_{nullptr};
  torch::nn::LayerNorm embeddingNorm_{nullptr};
  std::vector<std::shared_ptr<detail::BertLayer>> layers_;
  // A child module rather than members of this one: named_parameters() lists a
  // module's own parameters before its children's, and the head must come last.
  std::shared_ptr<detail::MlmHead> head_;
};

}  // namespace gradzip::models
