// Implements data/MlmDataset.h.
#include "data/MlmDataset.h"

#include "util/Error.h"

#include <algorithm>

namespace gradzip::data {

MlmDataset::MlmDataset(std::string name, const std::vector<int32_t>& stream, MlmVocab vocab, MlmOptions options)
    : name_(std::move(name)), vocab_(vocab), options_(options) {
  const int64_t t = options_.seqLen;
  GZ_CHECK(t >= 2, "{}: seq_len must be at least 2, got {}", name_, t);
  GZ_CHECK(options_.maskProb > 0 && options_.maskProb < 1, "{}: mask_prob must be in (0, 1), got {}", name_,
           options_.maskProb);
  GZ_CHECK(options_.maskTokenProb >= 0 && options_.randomTokenProb >= 0 &&
               options_.maskTokenProb + options_.randomTokenProb <= 1,
           "{}: mask/random replacement probabilities {} and {} must be >= 0 and sum to <= 1", name_,
           options_.maskTokenProb, options_.randomTokenProb);
  GZ_CHECK(vocab_.firstRegularId < vocab_.vocabSize, "{}: vocabulary of {} ids has no ordinary tokens", name_,
           vocab_.vocabSize);
  const int64_t body = t - 1;
  const auto n = int64_t(stream.size()) / body;
  GZ_CHECK(n > 0, "{}: {} tokens are too few for one sequence of length {}", name_, stream.size(), t);
  auto bad = std::find_if(stream.begin(), stream.end(), [&](int32_t id) { return id < 0 || id >= vocab_.vocabSize; });
  GZ_CHECK(bad == stream.end(), "{}: token id {} at position {} is outside the vocabulary [0, {})", name_,
           bad == stream.end() ? 0 : *bad, bad - stream.begin(), vocab_.vocabSize);

  sequences_ = at::empty({n, t}, at::kInt);
  int32_t* out = sequences_.data_ptr<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    out[i * t] = int32_t(vocab_.clsId);
    std::copy_n(stream.begin() + i * body, body, out + i * t + 1);
  }
}

Batch MlmDataset::getBatch(const std::vector<int64_t>& indices, Rng& rng) const {
  GZ_CHECK(!indices.empty(), "{}: empty batch requested", name_);
  for (int64_t i : indices)
    GZ_CHECK(i >= 0 && i < size(), "{}: example index {} out of range [0, {})", name_, i, size());
  const int64_t b = int64_t(indices.size()), t = options_.seqLen;
  Batch batch;
  batch.input = sequences_.index_select(0, at::tensor(indices, at::kLong)).to(at::kLong);
  batch.target = at::full({b, t}, kIgnoreIndex, at::kLong);
  int64_t* in = batch.input.data_ptr<int64_t>();
  int64_t* label = batch.target.data_ptr<int64_t>();
  const uint64_t regular = uint64_t(vocab_.vocabSize - vocab_.firstRegularId);
  const double keepThreshold = options_.maskTokenProb + options_.randomTokenProb;
  for (int64_t k = 0; k < b * t; ++k) {
    if (in[k] < vocab_.firstRegularId) continue;  // never mask [CLS], [SEP], <unk>, ...
    if (!rng.bernoulli(options_.maskProb)) continue;
    label[k] = in[k];
    double u = rng.uniform();
    if (u < options_.maskTokenProb) {
      in[k] = vocab_.maskId;
    } else if (u < keepThreshold) {
      in[k] = vocab_.firstRegularId + int64_t(rng.uniformInt(regular));
    }  // else: unchanged, but still predicted
  }
  return batch;
}

DatasetInfo MlmDataset::info() const {
  DatasetInfo i;
  i.kind = "mlm";
  i.vocabSize = vocab_.vocabSize;
  i.seqLen = options_.seqLen;
  i.maskId = vocab_.maskId;
  i.padId = vocab_.padId;
  return i;
}

std::string MlmDataset::describe() const {
  return fmt::format("{}: {} sequences of {} tokens, vocab {}, masking {:g}% ({:g}/{:g}/{:g})", name_, size(),
                     options_.seqLen, vocab_.vocabSize, options_.maskProb * 100, options_.maskTokenProb * 100,
                     options_.randomTokenProb * 100, (1 - options_.maskTokenProb - options_.randomTokenProb) * 100);
}

}  // namespace gradzip::data
