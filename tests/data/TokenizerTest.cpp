// Tests data/Tokenizer.h with a tiny SentencePiece model (vocab 120) trained on
// generated text in a temporary cache directory: special ids, exact round
// trips, the model and encoded-ids caches, and corpus encoding with [SEP].
#include "data/Tokenizer.h"

#include "data/Rng.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace gradzip::data {
namespace {

// Documents of lowercase sentences over a 30-word vocabulary (deterministic).
std::vector<std::string> generatedDocuments(int docs, int lines, uint64_t seed) {
  static const std::vector<std::string> words = {
      "the",    "kernel", "driver", "memory", "page",  "device", "interrupt", "lock",  "thread", "queue",
      "buffer", "read",   "write",  "map",    "table", "entry",  "cache",     "flush", "node",   "tree",
      "list",   "head",   "tail",   "value",  "bit",   "mask",   "field",     "state", "task",   "timer"};
  Rng rng(seed);
  std::vector<std::string> out;
  for (int d = 0; d < docs; ++d) {
    std::string doc;
    for (int l = 0; l < lines; ++l) {
      int n = 4 + int(rng.uniformInt(8));
      for (int w = 0; w < n; ++w) doc += (w ? " " : "") + words[rng.uniformInt(words.size())];
      doc += ".\n";
    }
    out.push_back(doc);
  }
  return out;
}

TokenizerOptions tinyOptions(const std::string& cacheDir) {
  TokenizerOptions o;
  o.vocabSize = 120;
  o.cacheDir = cacheDir;
  o.threads = 2;
  return o;
}

TEST(Tokenizer, TrainsTinyModelWithSpecialIdsAndRoundTrips) {
  gradzip::testing::TempDir tmp;
  TextCorpus corpus = TextCorpus::fromDocuments(generatedDocuments(20, 30, 1), "generated");
  auto tok = Tokenizer::trainOrLoad(corpus, tinyOptions(tmp.path()));
  EXPECT_LE(tok->vocabSize(), 120);
  EXPECT_GT(tok->vocabSize(), Tokenizer::kFirstRegularId + 30);
  std::string text = "the kernel driver flush the cache.";
  std::vector<int> ids = tok->encode(text);
  EXPECT_EQ(tok->decode(ids), text);
  // Ordinary text never encodes to a special id.
  for (int id : ids) EXPECT_GE(id, Tokenizer::kFirstRegularId);
  EXPECT_EQ(tok->decode({Tokenizer::kMaskId}), "");  // [MASK] is a control symbol: no surface text
}

TEST(Tokenizer, CachesModelByCorpusAndVocab) {
  gradzip::testing::TempDir tmp;
  TextCorpus corpus = TextCorpus::fromDocuments(generatedDocuments(10, 30, 2), "generated");
  auto first = Tokenizer::trainOrLoad(corpus, tinyOptions(tmp.path()));
  auto written = std::filesystem::last_write_time(first->modelPath());
  auto again = Tokenizer::trainOrLoad(corpus, tinyOptions(tmp.path()));
  EXPECT_EQ(again->modelPath(), first->modelPath());
  EXPECT_EQ(std::filesystem::last_write_time(again->modelPath()), written);  // loaded, not retrained
  TokenizerOptions other = tinyOptions(tmp.path());
  other.vocabSize = 100;
  EXPECT_NE(Tokenizer::trainOrLoad(corpus, other)->modelPath(), first->modelPath());
  TextCorpus changed = TextCorpus::fromDocuments(generatedDocuments(10, 30, 3), "generated");
  EXPECT_NE(Tokenizer::trainOrLoad(changed, tinyOptions(tmp.path()))->modelPath(), first->modelPath());
}

TEST(Tokenizer, EncodesCorpusWithSeparatorsAndCachesIds) {
  gradzip::testing::TempDir tmp;
  auto docs = generatedDocuments(6, 10, 4);
  TextCorpus corpus = TextCorpus::fromDocuments(docs, "generated");
  auto tok = Tokenizer::trainOrLoad(corpus, tinyOptions(tmp.path()));
  std::vector<int32_t> ids = tok->encodeCorpus(corpus, 2);
  // Exactly one [SEP] per document, each closing it; the pieces between are the lines' encodings.
  EXPECT_EQ(std::count(ids.begin(), ids.end(), Tokenizer::kSepId), 6);
  EXPECT_EQ(ids.back(), Tokenizer::kSepId);
  std::vector<int32_t> expected;
  size_t start = 0;
  while (start < docs[0].size()) {
    size_t end = docs[0].find('\n', start);
    for (int id : tok->encode(docs[0].substr(start, end - start))) expected.push_back(id);
    start = end + 1;
  }
  expected.push_back(Tokenizer::kSepId);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), ids.begin()));
  // The second call reads the ids cache file and returns the same stream.
  size_t cacheFiles = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path()))
    cacheFiles += e.path().filename().string().rfind("ids-", 0) == 0;
  EXPECT_EQ(cacheFiles, 1u);
  EXPECT_EQ(tok->encodeCorpus(corpus, 1), ids);
}

// Regression (review of the cache readers): the ids cache's element count was
// checked as 16 + 4n == file size, which a corrupt count wraps around (n = 2^62
// passes for a 16-byte file and resize() throws std::length_error), and ids were
// not checked against the vocabulary. A corrupt cache is now re-encoded.
TEST(Tokenizer, CorruptIdsCacheIsReencoded) {
  gradzip::testing::TempDir tmp;
  TextCorpus corpus = TextCorpus::fromDocuments(generatedDocuments(3, 8, 5), "generated");
  auto tok = Tokenizer::trainOrLoad(corpus, tinyOptions(tmp.path()));
  const std::vector<int32_t> ids = tok->encodeCorpus(corpus, 1);
  std::string cache;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path()))
    if (e.path().filename().string().rfind("ids-", 0) == 0) cache = e.path().string();
  ASSERT_FALSE(cache.empty());
  auto writeCache = [&](uint64_t n, const std::vector<int32_t>& body) {
    std::ofstream out(cache, std::ios::binary | std::ios::trunc);
    out.write("GZIDS01\n", 8);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(reinterpret_cast<const char*>(body.data()), std::streamsize(body.size() * sizeof(int32_t)));
  };
  writeCache(uint64_t(1) << 62, {});  // 16 + 4 * 2^62 wraps to 16, the file's size
  EXPECT_EQ(tok->encodeCorpus(corpus, 1), ids);
  writeCache(ids.size(), std::vector<int32_t>(ids.size(), 1 << 30));  // right size, ids past the vocabulary
  EXPECT_EQ(tok->encodeCorpus(corpus, 1), ids);
}

TEST(Tokenizer, BadModelFileAndOptions) {
  gradzip::testing::TempDir tmp;
  std::string bad = tmp.path() + "/bad.model";
  std::FILE* f = std::fopen(bad.c_str(), "wb");
  std::fputs("not a model", f);
  std::fclose(f);
  EXPECT_THROW(Tokenizer::loadFile(bad), UserError);
  TextCorpus corpus = TextCorpus::fromDocuments({"a b c\n"}, "tiny");
  TokenizerOptions o = tinyOptions(tmp.path());
  o.modelType = "wordpiece";
  EXPECT_THROW(Tokenizer::trainOrLoad(corpus, o), UserError);
}

}  // namespace
}  // namespace gradzip::data
