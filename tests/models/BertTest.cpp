// Tests of models/Bert.{h,cpp}: the closed-form parameter count, weight tying,
// a forward pass recomputed by hand from the named parameters, padding masks,
// input checks and gradients.
#include "models/Bert.h"

#include "models/Registry.h"
#include "tests/models/ModelTesting.h"
#include "util/Error.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

namespace gradzip::models {
namespace {

namespace F = torch::nn::functional;

ModelOptions smallBert(int64_t layers = 2, double dropout = 0.1) {
  ModelOptions o;
  o.name = "bert";
  o.bert.vocabSize = 50;
  o.bert.maxLen = 16;
  o.bert.layers = layers;
  o.bert.hidden = 8;
  o.bert.heads = 2;
  o.bert.intermediate = 12;
  o.bert.dropout = dropout;
  return o;
}

std::shared_ptr<Bert> makeBert(const ModelOptions& o) {
  auto m = std::dynamic_pointer_cast<Bert>(makeModel(o));
  EXPECT_NE(m, nullptr);
  return m;
}

TEST(BertTest, ParameterCountClosedForm) {
  // V = 50, P = 16, H = 8, I = 12, N = 2 (models/Bert.h):
  //   embeddings  V·H + P·H + 2H            = 400 + 128 + 16          =   544
  //   per layer   4H² + 4H + 2HI + I + H + 4H = 256 + 32 + 192 + 12 + 8 + 32 = 532
  //   MLM head    H² + H + 2H + V           = 64 + 8 + 16 + 50        =   138
  //   total       544 + 2·532 + 138                                    = 1,746
  // The decoder weight (V·H = 400) is the embedding and is NOT counted twice.
  auto m = makeBert(smallBert());
  EXPECT_EQ(parameterCount(*m), 1746);
  int64_t listed = 0;
  for (const auto& p : m->parameters()) listed += p.numel();
  EXPECT_EQ(listed, 1746) << "parameters() must list the tied weight once";
  // The defaults (V 8192, P 128, H 256, I 1024, N 4), as quoted in models/README.md:
  // 2,097,152 + 32,768 + 512 + 4·(262,144 + 1,024 + 524,288 + 1,024 + 256 + 1,024)
  // + 65,536 + 256 + 512 + 8,192 = 5,363,968.
  ModelOptions defaults;
  defaults.name = "bert";
  EXPECT_EQ(parameterCount(*makeModel(defaults)), 5'363'968);
  // Registration follows the forward pass: embeddings, layers, MLM head.
  const auto keys = m->named_parameters().keys();
  ASSERT_EQ(keys.size(), 4u + 2 * 12 + 5);  // 4 embedding tensors, 12 per layer, 5 in the head
  EXPECT_EQ(keys.front(), "token_embedding.weight");
  EXPECT_EQ(keys[4], "layers.0.qkv.weight");
  EXPECT_EQ(keys.back(), "mlm_head.decoder.bias");
}

TEST(BertTest, DecoderWeightIsTheTokenEmbedding) {
  auto m = makeBert(smallBert());
  EXPECT_EQ(m->decoderWeight().data_ptr(), m->tokenEmbeddingWeight().data_ptr());
  EXPECT_EQ(m->named_parameters()["token_embedding.weight"].data_ptr(), m->decoderWeight().data_ptr());
  // A token that never occurs in the input gets an embedding-row gradient only
  // through the decoder: nonzero iff the decoder really uses the parameter.
  auto ids = torch::randint(0, 40, {2, 6}, torch::kLong);  // ids 40..49 never occur
  m->zero_grad();
  m->forward(ids).logsumexp(-1).sum().backward();
  const auto g = m->named_parameters()["token_embedding.weight"].grad();
  ASSERT_TRUE(g.defined());
  EXPECT_GT(g[45].abs().sum().item<double>(), 0.0);
}

TEST(BertTest, ForwardMatchesHandComputation) {
  // One layer, no dropout, eval mode; recompute BERT from the named parameters:
  // x = LN(E[ids] + P[0:T]); a = LN(x + W_o·Attn + b_o); y = LN(a + W_2·gelu(W_1·a + b_1) + b_2);
  // logits = LN(gelu(W_d·y + b_d))·Eᵀ + b.
  torch::manual_seed(7);
  auto m = makeBert(smallBert(/*layers=*/1, /*dropout=*/0.0));
  m->eval();
  auto p = m->named_parameters();
  // Make LayerNorm and bias parameters non-trivial so the check covers them.
  {
    torch::NoGradGuard g;
    for (auto& kv : p)
      if (kv.key().find("bias") != std::string::npos || kv.key().find("norm") != std::string::npos)
        kv.value().add_(torch::randn_like(kv.value()) * 0.1);
  }
  const int64_t B = 2, T = 5, H = 8, heads = 2, dh = H / heads;
  auto ids = torch::randint(0, 50, {B, T}, torch::kLong);
  auto ln = [&](const at::Tensor& x, const std::string& n) {
    return F::layer_norm(x, F::LayerNormFuncOptions({H}).weight(p[n + ".weight"]).bias(p[n + ".bias"]).eps(1e-12));
  };
  auto lin = [&](const at::Tensor& x, const std::string& n) {
    return torch::linear(x, p[n + ".weight"], p[n + ".bias"]);
  };
  torch::NoGradGuard noGrad;
  auto x = ln(p["token_embedding.weight"].index_select(0, ids.flatten()).view({B, T, H}) +
                  p["position_embedding.weight"].slice(0, 0, T),
              "embedding_norm");
  auto qkv = lin(x, "layers.0.qkv");  // [B, T, 3H]: Q, K, V in that order
  auto split = [&](int64_t i) { return qkv.slice(2, i * H, (i + 1) * H).view({B, T, heads, dh}).transpose(1, 2); };
  auto q = split(0), k = split(1), v = split(2);
  auto att = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(dh)), -1);
  auto ctx = torch::matmul(att, v).transpose(1, 2).reshape({B, T, H});
  auto a = ln(x + lin(ctx, "layers.0.attn_out"), "layers.0.attn_norm");
  auto y = ln(a + lin(torch::gelu(lin(a, "layers.0.ffn_in")), "layers.0.ffn_out"), "layers.0.ffn_norm");
  auto h = ln(torch::gelu(lin(y, "mlm_head.dense")), "mlm_head.norm");
  auto expected = torch::matmul(h, p["token_embedding.weight"].t()) + p["mlm_head.decoder.bias"];
  auto got = m->forward(ids);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{B, T, 50}));
  EXPECT_TRUE(torch::allclose(got, expected, 1e-4, 1e-5)) << (got - expected).abs().max();
}

TEST(BertTest, PaddingIsNotAttendedTo) {
  // In eval mode the logits of the 5 real tokens of a padded length-8 sequence
  // equal those of the unpadded length-5 sequence (whatever the pad ids are);
  // without the mask they differ.
  torch::manual_seed(8);
  auto m = makeBert(smallBert());
  m->eval();
  torch::NoGradGuard noGrad;
  // At BERT's init (std 0.02) attention is almost uniform and padding changes the
  // logits by only ~1e-4; std 0.5 weights make the "without mask" contrast clear.
  for (auto& p : m->parameters()) p.mul_(25.0);
  auto real = torch::randint(0, 50, {2, 5}, torch::kLong);
  auto padded = torch::cat({real, torch::randint(0, 50, {2, 3}, torch::kLong)}, 1);
  auto mask = torch::cat({torch::ones({2, 5}, torch::kLong), torch::zeros({2, 3}, torch::kLong)}, 1);
  auto ref = m->forward(real);
  auto masked = m->forwardMasked(padded, mask).slice(1, 0, 5);
  EXPECT_TRUE(torch::allclose(masked, ref, 1e-4, 1e-5)) << (masked - ref).abs().max();
  auto unmasked = m->forward(padded).slice(1, 0, 5);
  EXPECT_GT((unmasked - ref).abs().max().item<double>(), 0.1);
  // A mask of all ones is the same as no mask.
  EXPECT_TRUE(torch::allclose(m->forwardMasked(padded, torch::ones({2, 8}, torch::kBool)), m->forward(padded)));
}

TEST(BertTest, RejectsBadInputs) {
  auto m = makeBert(smallBert());
  auto expectError = [&](auto&& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "expected UserError mentioning " << needle;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expectError([&] { m->forward(torch::zeros({1, 17}, torch::kLong)); }, "bert.max_len = 16");
  expectError([&] { m->forward(torch::full({1, 4}, 50, torch::kLong)); }, "bert.vocab_size = 50");
  expectError([&] { m->forward(torch::zeros({1, 4})); }, "integer token ids");
  expectError([&] { m->forwardMasked(torch::zeros({2, 4}, torch::kLong), torch::ones({2, 5})); }, "[B, T] = [2, 4]");
}

TEST(BertTest, DropoutOnlyInTraining) {
  torch::manual_seed(9);
  auto m = makeBert(smallBert(2, 0.5));
  torch::NoGradGuard noGrad;
  auto ids = torch::randint(0, 50, {2, 6}, torch::kLong);
  m->eval();
  EXPECT_TRUE(torch::equal(m->forward(ids), m->forward(ids)));
  m->train();
  EXPECT_FALSE(torch::allclose(m->forward(ids), m->forward(ids)));
}

TEST(BertTest, EveryParameterGetsAGradient) {
  torch::manual_seed(10);
  auto m = makeBert(smallBert());
  EXPECT_EQ(m->kind(), ModelKind::kMaskedLm);
  auto ids = torch::randint(0, 50, {3, 10}, torch::kLong);
  auto logits = m->forward(ids);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{3, 10, 50}));
  auto targets = torch::randint(0, 50, {30}, torch::kLong);
  testing::expectEveryParameterGetsGradient(*m, F::cross_entropy(logits.view({30, 50}), targets));
}

}  // namespace
}  // namespace gradzip::models
