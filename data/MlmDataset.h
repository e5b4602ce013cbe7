// The masked-language-modelling dataset (BERT, Devlin et al. 2019, §3.1 "Task
// #1: Masked LM"): a token id stream packed into fixed-length sequences
// [CLS] t_1 ... t_{T-1}, documents separated by [SEP] inside the stream (as
// RoBERTa's FULL-SENTENCES packing; no padding, so no attention mask is needed).
// Per batch, each ordinary token is chosen with probability maskProb (15%); a
// chosen token becomes [MASK] with probability 80%, a uniformly random ordinary
// token with 10%, and stays unchanged with 10%. Labels hold the original id at
// chosen positions and kIgnoreIndex (-100) elsewhere. The choice uses the
// caller's Rng, so a batch is reproducible.
#pragma once

#include "data/Dataset.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::data {

// The vocabulary facts masking needs: ids below firstRegularId are specials
// ([PAD], <unk>, [CLS], [SEP], [MASK]) that are never chosen nor drawn as
// random replacements.
struct MlmVocab {
  int64_t vocabSize = 0;
  int64_t padId = 0, clsId = 2, sepId = 3, maskId = 4;
  int64_t firstRegularId = 5;
};

struct MlmOptions {
  int64_t seqLen = 128;         // T, including the leading [CLS]
  double maskProb = 0.15;       // BERT §3.1: 15% of token positions
  double maskTokenProb = 0.8;   // of chosen: replaced by [MASK]
  double randomTokenProb = 0.1;  // of chosen: replaced by a random token (rest unchanged)
};

class MlmDataset : public Dataset {
 public:
  // Packs `stream` into floor(len / (T-1)) sequences (the remainder is dropped).
  // Throws UserError if the stream is too short for one sequence or holds an id
  // outside [0, vocabSize).
  MlmDataset(std::string name, const std::vector<int32_t>& stream, MlmVocab vocab, MlmOptions options);

  int64_t size() const override { return sequences_.size(0); }
  // input int64 [B,T] (masked), target int64 [B,T] (original id or -100).
  // Draw order per position (row-major): one uniform for "chosen" (only for
  // ordinary tokens), then for a chosen one a uniform for the 80/10/10 branch
  // and, for the random branch, the replacement id.
  Batch getBatch(const std::vector<int64_t>& indices, Rng& rng) const override;
  DatasetInfo info() const override;
  std::string describe() const override;

  // The unmasked sequences, int32 [N,T].
  const at::Tensor& sequences() const { return sequences_; }
  const MlmVocab& vocab() const { return vocab_; }

 private:
  std::string name_;
  MlmVocab vocab_;
  MlmOptions options_;
  at::Tensor sequences_;
};

}  // namespace gradzip::data
