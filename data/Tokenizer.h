// The subword tokenizer of text MLM: a SentencePiece model (Kudo & Richardson
// 2018; unigram LM by default, or BPE) trained on the training corpus the first
// time a (corpus, options) pair is seen and cached on disk, keyed by the
// corpus fingerprint and the options, so later runs (and other ranks) load it.
// Training sees a bounded, evenly strided sample of the corpus lines
// (`sampleBytes`, 4 MB by default: all of linux-doc is ~24 MB and training on it
// would take minutes); encoding always covers the whole corpus.
//
// Ids: 0 [PAD], 1 <unk>, 2 [CLS] (SentencePiece's BOS), 3 [SEP] (EOS), 4 [MASK]
// (a control symbol); ordinary pieces start at 5.
#pragma once

#include "data/TextCorpus.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace gradzip::data {

struct TokenizerOptions {
  int64_t vocabSize = 8000;         // upper bound; a tiny corpus may yield fewer pieces
  std::string modelType = "unigram";  // unigram | bpe
  int64_t sampleBytes = 4 << 20;    // training sample bound
  std::string cacheDir;             // "" = $XDG_CACHE_HOME/gradzip or ~/.cache/gradzip
  int threads = 2;                  // training and encoding threads
};

// "" -> the default cache directory.
std::string resolveCacheDir(const std::string& cacheDir);

class Tokenizer {
 public:
  static constexpr int kPadId = 0, kUnkId = 1, kClsId = 2, kSepId = 3, kMaskId = 4, kFirstRegularId = 5;

  // Loads the cached model for (corpus, options) or trains and caches it. Ranks
  // sharing a cache directory serialise on a lock file, so one trains and the
  // rest load. Throws UserError if SentencePiece fails (message included).
  static std::shared_ptr<Tokenizer> trainOrLoad(const TextCorpus& corpus, const TokenizerOptions& options);
  // Loads a model file written by trainOrLoad.
  static std::shared_ptr<Tokenizer> loadFile(const std::string& path);
  ~Tokenizer();

  std::vector<int> encode(std::string_view text) const;
  std::string decode(const std::vector<int>& ids) const;
  // The whole corpus as one id stream: each document's non-empty lines encoded
  // and concatenated, each document followed by [SEP]. Runs on `threads`
  // threads; cached next to the model, keyed by the corpus fingerprint.
  std::vector<int32_t> encodeCorpus(const TextCorpus& corpus, int threads) const;

  int64_t vocabSize() const;
  const std::string& modelPath() const { return modelPath_; }

 private:
  Tokenizer() = default;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string modelPath_;
  uint64_t modelKey_ = 0;
};

}  // namespace gradzip::data
