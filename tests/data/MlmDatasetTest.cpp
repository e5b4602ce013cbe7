// Tests data/MlmDataset.h: packing, and the BERT masking statistics (15% of
// ordinary tokens chosen; of those 80% [MASK], 10% random, 10% unchanged) with
// binomial tolerances derived below.
#include "data/MlmDataset.h"

#include "util/Error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gradzip::data {
namespace {

MlmVocab vocab(int64_t v) {
  MlmVocab m;
  m.vocabSize = v;
  return m;  // [PAD]=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4, ordinary ids from 5
}

TEST(MlmDataset, PacksStreamBehindClsAndDropsRemainder) {
  std::vector<int32_t> stream;
  for (int i = 0; i < 23; ++i) stream.push_back(5 + i);
  MlmOptions o;
  o.seqLen = 6;  // [CLS] + 5 tokens
  MlmDataset d("t", stream, vocab(100), o);
  ASSERT_EQ(d.size(), 4);  // floor(23 / 5)
  EXPECT_TRUE(at::equal(d.sequences()[1], at::tensor({2, 10, 11, 12, 13, 14}, at::kInt)));
  EXPECT_TRUE(at::equal(d.sequences()[3], at::tensor({2, 20, 21, 22, 23, 24}, at::kInt)));
  DatasetInfo info = d.info();
  EXPECT_EQ(info.vocabSize, 100);
  EXPECT_EQ(info.seqLen, 6);
  EXPECT_EQ(info.maskId, 4);
}

TEST(MlmDataset, MaskingStatisticsMatchBert) {
  // A stream of ordinary tokens with a [SEP] every 50 tokens, V = 1000.
  const int64_t v = 1000, regular = v - 5;
  std::vector<int32_t> stream;
  Rng gen(11);
  for (int i = 0; i < 200000; ++i) stream.push_back(i % 50 == 49 ? 3 : int32_t(5 + gen.uniformInt(regular)));
  MlmOptions o;
  o.seqLen = 128;
  MlmDataset d("t", stream, vocab(v), o);
  std::vector<int64_t> all(size_t(d.size()));
  for (int64_t i = 0; i < d.size(); ++i) all[size_t(i)] = i;
  Rng rng(12345);
  Batch b = d.getBatch(all, rng);
  at::Tensor orig = d.sequences().to(at::kLong);
  ASSERT_EQ(b.input.sizes(), orig.sizes());

  at::Tensor eligible = orig >= 5;
  at::Tensor chosen = b.target != kIgnoreIndex;
  // Labels: the original id where chosen; specials ([CLS], [SEP]) are never chosen.
  EXPECT_TRUE(at::equal(b.target.masked_select(chosen), orig.masked_select(chosen)));
  EXPECT_EQ((chosen & ~eligible).sum().item<int64_t>(), 0);
  // Unchosen positions are untouched.
  EXPECT_TRUE(at::equal(b.input.masked_select(~chosen), orig.masked_select(~chosen)));

  const double n = eligible.sum().item<double>();
  const double m = chosen.sum().item<double>();
  const double masked = (chosen & (b.input == 4)).sum().item<double>();
  const double same = (chosen & (b.input == orig)).sum().item<double>();
  const double other = m - masked - same;
  // Each eligible token is chosen independently with p = 0.15, so the chosen
  // count is Binomial(n, p): its fraction has sd sqrt(p(1-p)/n) (~0.0009 for
  // n ~ 196k). Given m chosen, the 80/10/10 outcome counts are multinomial: a
  // branch with probability q has fraction sd sqrt(q(1-q)/m) (m ~ 29k: 0.0023
  // for q = 0.8, 0.0018 for q = 0.1). A random replacement equals the original
  // with probability 1/(V-5), so "unchanged" has q = 0.1 + 0.1/(V-5) and
  // "replaced by another token" q = 0.1 (1 - 1/(V-5)). All within 5 sd.
  auto expectFraction = [](double count, double total, double q, const char* what) {
    EXPECT_NEAR(count / total, q, 5 * std::sqrt(q * (1 - q) / total)) << what;
  };
  expectFraction(m, n, 0.15, "chosen");
  expectFraction(masked, m, 0.8, "[MASK]");
  expectFraction(same, m, 0.1 + 0.1 / double(regular), "unchanged");
  expectFraction(other, m, 0.1 * (1 - 1 / double(regular)), "random");
  // Random replacements are ordinary ids.
  at::Tensor replaced = chosen & (b.input != 4) & (b.input != orig);
  at::Tensor ids = b.input.masked_select(replaced);
  EXPECT_GE(ids.min().item<int64_t>(), 5);
  EXPECT_LT(ids.max().item<int64_t>(), v);
}

TEST(MlmDataset, SameRngSameMask) {
  std::vector<int32_t> stream(5000);
  for (size_t i = 0; i < stream.size(); ++i) stream[i] = int32_t(5 + i % 90);
  MlmDataset d("t", stream, vocab(100), MlmOptions{});
  Rng a(3), b(3), c(4);
  Batch x = d.getBatch({0, 5, 9}, a);
  Batch y = d.getBatch({0, 5, 9}, b);
  EXPECT_TRUE(at::equal(x.input, y.input) && at::equal(x.target, y.target));
  EXPECT_FALSE(at::equal(x.target, d.getBatch({0, 5, 9}, c).target));
}

TEST(MlmDataset, RejectsBadInput) {
  EXPECT_THROW(MlmDataset("t", {5, 6, 7}, vocab(100), MlmOptions{}), UserError);  // too short
  std::vector<int32_t> stream(300, 5);
  stream[17] = 100;
  try {
    MlmDataset("t", stream, vocab(100), MlmOptions{});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("token id 100 at position 17"), std::string::npos) << e.what();
  }
  std::vector<int32_t> ok(300, 5);
  MlmDataset d("t", ok, vocab(100), MlmOptions{});
  Rng rng(1);
  EXPECT_THROW(d.getBatch({d.size()}, rng), UserError);
}

}  // namespace
}  // namespace gradzip::data
