// Implements models/Bert.h: embeddings, the post-LN encoder layer (fused QKV
// projection and ATen's scaled_dot_product_attention) and the tied MLM head.
#include "models/Bert.h"

#include "util/Error.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>

#include <optional>

namespace gradzip::models {

namespace nn = torch::nn;

namespace {

constexpr double kInitStd = 0.02;  // BERT's initializer_range
constexpr double kLayerNormEps = 1e-12;  // BERT's layer_norm_eps

nn::Linear makeLinear(int64_t in, int64_t out) {
  nn::Linear l(in, out);
  nn::init::normal_(l->weight, 0.0, kInitStd);
  nn::init::zeros_(l->bias);
  return l;
}

nn::LayerNorm makeLayerNorm(int64_t h) {
  return nn::LayerNorm(nn::LayerNormOptions({h}).eps(kLayerNormEps));
}

}  // namespace

namespace detail {

// One post-LN encoder layer (Vaswani et al. §3.1-3.3, BERT's arrangement):
//   a = LN(x + Dropout(W_o · MHA(x)));  y = LN(a + Dropout(W_2 · GELU(W_1 · a)))
// with MHA(x) = Concat_h softmax(Q_h K_hᵀ / sqrt(d_h) + mask) V_h, d_h = H / heads.
class BertLayer : public nn::Module {
 public:
  BertLayer(const BertOptions& o)
      : hidden_(o.hidden), heads_(o.heads), dropout_(o.dropout),
        qkv_(register_module("qkv", makeLinear(o.hidden, 3 * o.hidden))),
        attnOut_(register_module("attn_out", makeLinear(o.hidden, o.hidden))),
        attnNorm_(register_module("attn_norm", makeLayerNorm(o.hidden))),
        ffnIn_(register_module("ffn_in", makeLinear(o.hidden, o.intermediate))),
        ffnOut_(register_module("ffn_out", makeLinear(o.intermediate, o.hidden))),
        ffnNorm_(register_module("ffn_norm", makeLayerNorm(o.hidden))) {}

  // x [B, T, H]; keyMask undefined or bool [B, 1, 1, T] (true = may be attended to).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& keyMask) {
    const int64_t b = x.size(0), t = x.size(1), dh = hidden_ / heads_;
    const double p = is_training() ? dropout_ : 0.0;
    // One [H, 3H] matmul, then views: [B, T, 3, heads, dh] -> 3 x [B, heads, T, dh].
    const at::Tensor qkv = qkv_->forward(x).view({b, t, 3, heads_, dh}).permute({2, 0, 3, 1, 4});
    std::optional<at::Tensor> mask;
    if (keyMask.defined()) mask = keyMask;
    // Scale defaults to 1/sqrt(dh); dropout on the attention probabilities as BERT.
    at::Tensor ctx = at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], mask, p);
    ctx = ctx.transpose(1, 2).reshape({b, t, hidden_});
    at::Tensor a = attnNorm_->forward(x + at::dropout(attnOut_->forward(ctx), p, is_training()));
    at::Tensor h = at::gelu(ffnIn_->forward(a));  // exact (erf) GELU, as BERT
    return ffnNorm_->forward(a + at::dropout(ffnOut_->forward(h), p, is_training()));
  }

 private:
  int64_t hidden_, heads_;
  double dropout_;
  nn::Linear qkv_, attnOut_;
  nn::LayerNorm attnNorm_;
  nn::Linear ffnIn_, ffnOut_;
  nn::LayerNorm ffnNorm_;
};

// BERT's MLM transform, then logits = h Eᵀ + b with the tied embedding E:
//   logits = LN(GELU(W_d x + b_d)) Eᵀ + b.
class MlmHead : public nn::Module {
 public:
  explicit MlmHead(const BertOptions& o)
      : dense_(register_module("dense", makeLinear(o.hidden, o.hidden))),
        norm_(register_module("norm", makeLayerNorm(o.hidden))),
        decoder_(register_module("decoder", std::make_shared<nn::Module>())),
        // The decoder's weight is the token embedding (tied); only its bias is new.
        // It sits in a child module so that it is listed after dense and norm
        // (own parameters are listed before children's).
        decoderBias_(decoder_->register_parameter("bias", at::zeros({o.vocabSize}))) {}

  at::Tensor forward(const at::Tensor& x, const at::Tensor& tokenEmbedding) {
    at::Tensor h = norm_->forward(at::gelu(dense_->forward(x)));
    return at::linear(h, tokenEmbedding, decoderBias_);
  }

  const at::Tensor& decoderBias() const { return decoderBias_; }

 private:
  nn::Linear dense_;
  nn::LayerNorm norm_;
  std::shared_ptr<nn::Module> decoder_;
  at::Tensor decoderBias_;
};

}  // namespace detail

Bert::Bert(const ModelOptions& options) : Model(options.name), options_(options.bert) {
  const BertOptions& o = options_;
  GZ_CHECK(o.hidden % o.heads == 0, "model.bert.hidden: {} is not divisible by bert.heads = {}", o.hidden, o.heads);
  tokenEmbedding_ = register_module("token_embedding", nn::Embedding(o.vocabSize, o.hidden));
  positionEmbedding_ = register_module("position_embedding", nn::Embedding(o.maxLen, o.hidden));
  nn::init::normal_(tokenEmbedding_->weight, 0.0, kInitStd);
  nn::init::normal_(positionEmbedding_->weight, 0.0, kInitStd);
  embeddingNorm_ = register_module("embedding_norm", makeLayerNorm(o.hidden));
  nn::ModuleList layers;
  for (int64_t i = 0; i < o.layers; ++i) {
    auto layer = std::make_shared<detail::BertLayer>(o);
    layers->push_back(layer);
    layers_.push_back(layer);
  }
  register_module("layers", layers);
  head_ = register_module("mlm_head", std::make_shared<detail::MlmHead>(o));
}

const at::Tensor& Bert::decoderBias() const { return head_->decoderBias(); }

at::Tensor Bert::forward(const at::Tensor& input) { return forwardMasked(input, at::Tensor()); }

at::Tensor Bert::forwardMasked(const at::Tensor& input, const at::Tensor& attentionMask) {
  GZ_CHECK(input.dim() == 2 && (input.scalar_type() == at::kLong || input.scalar_type() == at::kInt),
           "model 'bert' expects integer token ids [B, T], got {} of type {}", shapeOf(input),
           c10::toString(input.scalar_type()));
  const int64_t b = input.size(0), t = input.size(1);
  GZ_CHECK(t >= 1 && t <= options_.maxLen, "model 'bert': sequence length {} is outside [1, bert.max_len = {}]", t,
           options_.maxLen);
  if (input.numel() > 0) {
    const auto [lo, hi] = at::aminmax(input);
    GZ_CHECK(lo.item<int64_t>() >= 0 && hi.item<int64_t>() < options_.vocabSize,
             "model 'bert': token ids must lie in [0, bert.vocab_size = {}), got [{}, {}]", options_.vocabSize,
             lo.item<int64_t>(), hi.item<int64_t>());
  }
  at::Tensor keyMask;
  if (attentionMask.defined()) {
    GZ_CHECK(attentionMask.dim() == 2 && attentionMask.size(0) == b && attentionMask.size(1) == t,
             "model 'bert': attention mask must be [B, T] = [{}, {}], got {}", b, t, shapeOf(attentionMask));
    keyMask = attentionMask.to(at::kBool).view({b, 1, 1, t});
  }

  const double p = is_training() ? options_.dropout : 0.0;
  // Positions 0..T-1 are the first T rows: a slice instead of a gather.
  at::Tensor x = tokenEmbedding_->forward(input) + positionEmbedding_->weight.slice(0, 0, t);
  x = at::dropout(embeddingNorm_->forward(x), p, is_training());
  for (const auto& layer : layers_) x = layer->forward(x, keyMask);
  return head_->forward(x, tokenEmbedding_->weight);
}

}  // namespace gradzip::models
