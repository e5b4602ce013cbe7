// Implements data/Tokenizer.h: SentencePiece training on a strided line sample,
// an flock-guarded on-disk cache, and parallel corpus encoding.
#include "data/Tokenizer.h"

#include "data/Rng.h"
#include "util/Error.h"
#include "util/Hash.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>

namespace gradzip::data {
namespace {

namespace fs = std::filesystem;

// Bump when the training recipe or the ids file format changes: old cache
// entries then stop matching instead of being misread.
constexpr uint64_t kCacheVersion = 1;
constexpr char kIdsMagic[8] = {'G', 'Z', 'I', 'D', 'S', '0', '1', '\n'};
constexpr unsigned kSpmSeed = 20240601;  // SentencePiece's sampling seed, for reproducible models

uint64_t hashBytes(std::string_view s) {
  Fnv1a64 h;
  h.update(s.data(), s.size());
  return h.value();
}

// Holds an exclusive flock on `path` for its lifetime.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    GZ_CHECK(fd_ >= 0, "{}: cannot create lock file: {}", path, std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0) GZ_CHECK(errno == EINTR, "{}: flock failed: {}", path, std::strerror(errno));
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& v) : v_(v) {}
  bool done() const override { return i_ >= v_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return v_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& v_;
  size_t i_ = 0;
};

// Visits the non-blank lines of `doc` (without the newline or trailing spaces).
template <class F>
void forEachLine(const std::string& doc, F&& f) {
  size_t start = 0;
  while (start < doc.size()) {
    size_t end = doc.find('\n', start);
    if (end == std::string::npos) end = doc.size();
    size_t last = end;
    while (last > start && std::isspace(static_cast<unsigned char>(doc[last - 1]))) --last;
    size_t first = start;
    while (first < last && std::isspace(static_cast<unsigned char>(doc[first]))) ++first;
    if (first < last) f(std::string_view(doc).substr(first, last - first));
    start = end + 1;
  }
}

// Every k-th non-blank line, k chosen so the sample is at most `maxBytes`:
// strided rather than a prefix, so every part of the corpus is represented.
std::vector<std::string> sampleLines(const TextCorpus& corpus, int64_t maxBytes) {
  int64_t total = 0, count = 0;
  for (const auto& d : corpus.documents()) forEachLine(d, [&](std::string_view l) { total += int64_t(l.size()); ++count; });
  int64_t stride = std::max<int64_t>(1, (total + maxBytes - 1) / std::max<int64_t>(1, maxBytes));
  std::vector<std::string> out;
  int64_t i = 0;
  for (const auto& d : corpus.documents())
    forEachLine(d, [&](std::string_view l) {
      if (i++ % stride == 0) out.emplace_back(l);
    });
  return out;
}

void trainModel(const TextCorpus& corpus, const TokenizerOptions& o, const std::string& modelPath) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> lines = sampleLines(corpus, o.sampleBytes);
  GZ_CHECK(!lines.empty(), "tokenizer: the training corpus has no non-blank lines");
  int64_t sampleBytes = 0;
  for (const auto& l : lines) sampleBytes += int64_t(l.size());
  spdlog::info("training a {} SentencePiece model (vocab {}) on {} lines, {:.1f} MB sampled from {}", o.modelType,
               o.vocabSize, lines.size(), double(sampleBytes) / 1e6, corpus.describe());

  std::string prefix = fmt::format("{}.tmp{}", modelPath.substr(0, modelPath.size() - 6), ::getpid());
  std::unordered_map<std::string, std::string> args = {
      {"model_prefix", prefix},
      {"model_type", o.modelType},
      {"vocab_size", std::to_string(o.vocabSize)},
      {"pad_id", std::to_string(Tokenizer::kPadId)},
      {"unk_id", std::to_string(Tokenizer::kUnkId)},
      {"bos_id", std::to_string(Tokenizer::kClsId)},
      {"eos_id", std::to_string(Tokenizer::kSepId)},
      {"pad_piece", "[PAD]"},
      {"bos_piece", "[CLS]"},
      {"eos_piece", "[SEP]"},
      {"control_symbols", "[MASK]"},  // the first control symbol after the four above gets id 4
      // A small corpus may not support vocab_size pieces; accept fewer instead of failing.
      {"hard_vocab_limit", "false"},
      {"num_threads", std::to_string(std::max(1, o.threads))},
      {"minloglevel", "1"},  // SentencePiece's own progress lines are very chatty
  };
  sentencepiece::SetRandomGeneratorSeed(kSpmSeed);
  VectorIterator it(lines);
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &it);
  GZ_CHECK(status.ok(), "tokenizer: SentencePiece training failed: {}", status.ToString());
  fs::rename(prefix + ".model", modelPath);
  fs::rename(prefix + ".vocab", modelPath.substr(0, modelPath.size() - 6) + ".vocab");
  spdlog::info("trained {} in {:.1f} s", modelPath,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// Reads an encoded-ids cache file; false (the caller re-encodes) when it is missing
// or not exactly what writeIds wrote for a vocabulary of `vocab` pieces: the count
// in the header must match the file size (compared without multiplying, so a
// corrupt count cannot wrap around it) and every id must be a valid piece.
bool readIds(const std::string& path, int64_t vocab, std::vector<int32_t>& ids) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  char magic[8];
  uint64_t n = 0;
  if (!in.read(magic, 8) || std::memcmp(magic, kIdsMagic, 8) != 0 || !in.read(reinterpret_cast<char*>(&n), 8))
    return false;
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size < 16 || (size - 16) % sizeof(int32_t) != 0 || n != (size - 16) / sizeof(int32_t)) return false;
  ids.resize(n);
  if (!in.read(reinterpret_cast<char*>(ids.data()), std::streamsize(n * sizeof(int32_t)))) return false;
  return std::all_of(ids.begin(), ids.end(), [vocab](int32_t id) { return id >= 0 && id < vocab; });
}

void writeIds(const std::string& path, const std::vector<int32_t>& ids) {
  std::string tmp = fmt::format("{}.tmp{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    uint64_t n = ids.size();
    out.write(kIdsMagic, 8);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(reinterpret_cast<const char*>(ids.data()), std::streamsize(n * sizeof(int32_t)));
    GZ_CHECK(bool(out), "{}: cannot write the encoded-ids cache", tmp);
  }
  fs::rename(tmp, path);  // atomic: readers never see a partial file
}

}  // namespace

std::string resolveCacheDir(const std::string& cacheDir) {
  if (!cacheDir.empty()) return cacheDir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "gradzip").string();
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "gradzip").string();
  return (fs::temp_directory_path() / "gradzip-cache").string();
}

std::shared_ptr<Tokenizer> Tokenizer::trainOrLoad(const TextCorpus& corpus, const TokenizerOptions& o) {
  GZ_CHECK(o.modelType == "unigram" || o.modelType == "bpe", "tokenizer: model type must be unigram or bpe, got '{}'",
           o.modelType);
  GZ_CHECK(o.vocabSize > kFirstRegularId + 10, "tokenizer: vocab_size {} is too small", o.vocabSize);
  GZ_CHECK(o.sampleBytes > 0, "tokenizer: sample size must be positive, got {}", o.sampleBytes);
  std::string dir = resolveCacheDir(o.cacheDir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  GZ_CHECK(fs::is_directory(dir), "{}: cannot create the tokenizer cache directory: {}", dir, ec.message());

  uint64_t key = Rng::derive({kCacheVersion, corpus.fingerprint(), uint64_t(o.vocabSize), hashBytes(o.modelType),
                              uint64_t(o.sampleBytes)})
                     .next();
  std::string base = (fs::path(dir) / fmt::format("spm-{:016x}-{}{}", key, o.modelType, o.vocabSize)).string();
  std::string modelPath = base + ".model";
  if (!fs::is_regular_file(modelPath)) {
    FileLock lock(base + ".lock");
    if (!fs::is_regular_file(modelPath)) trainModel(corpus, o, modelPath);  // another process may have won
  }
  return loadFile(modelPath);
}

std::shared_ptr<Tokenizer> Tokenizer::loadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GZ_CHECK(bool(in), "{}: cannot open SentencePiece model", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  std::shared_ptr<Tokenizer> t(new Tokenizer());
  t->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto status = t->sp_->LoadFromSerializedProto(bytes);
  GZ_CHECK(status.ok(), "{}: not a valid SentencePiece model: {}", path, status.ToString());
  GZ_CHECK(t->sp_->PieceToId("[MASK]") == kMaskId && t->sp_->pad_id() == kPadId && t->sp_->bos_id() == kClsId &&
               t->sp_->eos_id() == kSepId,
           "{}: SentencePiece model lacks gradzip's special ids ([PAD]=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4)", path);
  t->modelPath_ = path;
  t->modelKey_ = hashBytes(bytes);
  return t;
}

Tokenizer::~Tokenizer() = default;

int64_t Tokenizer::vocabSize() const { return sp_->GetPieceSize(); }

std::vector<int> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  auto status = sp_->Encode(text, &ids);
  GZ_CHECK(status.ok(), "tokenizer: encoding failed: {}", status.ToString());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string text;
  auto status = sp_->Decode(ids, &text);
  GZ_CHECK(status.ok(), "tokenizer: decoding failed: {}", status.ToString());
  return text;
}

std::vector<int32_t> Tokenizer::encodeCorpus(const TextCorpus& corpus, int threads) const {
  std::string cachePath =
      (fs::path(modelPath_).parent_path() /
       fmt::format("ids-{:016x}.bin", Rng::derive({kCacheVersion, modelKey_, corpus.fingerprint()}).next()))
          .string();
  std::vector<int32_t> ids;
  if (readIds(cachePath, vocabSize(), ids)) return ids;
  ids.clear();

  auto start = std::chrono::steady_clock::now();
  const auto& docs = corpus.documents();
  std::vector<std::vector<int32_t>> perDoc(docs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    std::vector<int> lineIds;
    for (size_t d; (d = next.fetch_add(1)) < docs.size();) {
      forEachLine(docs[d], [&](std::string_view line) {
        lineIds.clear();
        sp_->Encode(line, &lineIds).IgnoreError();  // Encode fails only on an unloaded model
        perDoc[d].insert(perDoc[d].end(), lineIds.begin(), lineIds.end());
      });
      perDoc[d].push_back(kSepId);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  size_t total = 0;
  for (const auto& v : perDoc) total += v.size();
  ids.reserve(total);
  for (const auto& v : perDoc) ids.insert(ids.end(), v.begin(), v.end());
  spdlog::info("encoded {} into {} tokens in {:.1f} s", corpus.describe(), ids.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  writeIds(cachePath, ids);
  return ids;
}

}  // namespace gradzip::data
