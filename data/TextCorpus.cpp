// Implements data/TextCorpus.h.
#include "data/TextCorpus.h"

#include "data/GzReader.h"
#include "util/Error.h"
#include "util/Hash.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace gradzip::data {
namespace {

namespace fs = std::filesystem;

constexpr size_t kValidEvery = 50;          // 1 in 50 documents (2%) is held out
constexpr double kSingleDocValidShare = 0.02;

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool hasTextExtension(const std::string& name, const std::vector<std::string>& exts) {
  for (const auto& e : exts)
    if (endsWith(name, e)) return true;
  return false;
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// WikiText marks an article by a " = Title = " line (sections are " = = ... = = ").
bool isArticleHeading(const std::string& line) {
  return line.size() > 3 && line.compare(0, 3, " = ") == 0 && line[3] != '=';
}

std::vector<std::string> splitWikiTextArticles(const std::string& text) {
  std::vector<std::string> docs;
  std::string current;
  auto flush = [&] {
    if (current.find_first_not_of(" \n") != std::string::npos) docs.push_back(std::move(current));  // skip blank
    current.clear();
  };
  for (auto& line : splitLines(text)) {
    if (isArticleHeading(line)) flush();
    current += line;
    current += '\n';
  }
  flush();
  return docs;
}

// wiki.<split>.tokens (WikiText-103) or wiki.<split>.raw (the raw variant), if present.
std::string wikiTextFile(const fs::path& dir, TextSplit split) {
  const char* name = split == TextSplit::kTrain ? "train" : "valid";
  for (const char* ext : {"tokens", "raw"}) {
    fs::path p = dir / fmt::format("wiki.{}.{}", name, ext);
    if (fs::is_regular_file(p)) return p.string();
  }
  return {};
}

// The whole text of `path`. zlib decides by content, whatever the name: a plain file
// passes through unchanged and gzip data is decompressed in full (never cut to the
// file's compressed size).
std::string readText(const std::string& path) { return readGzFile(path); }

}  // namespace

const std::vector<std::string>& defaultTextExtensions() {
  // linux-doc's prose is its .rst.gz files; its .txt.gz are mostly devicetree binding
  // schemas, left out unless asked for.
  static const std::vector<std::string> exts = {".rst.gz", ".rst", ".txt", ".raw", ".tokens"};
  return exts;
}

std::string defaultTextCorpusPath() {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/share/doc", ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("linux-doc-", 0) == 0 && fs::is_directory(e.path() / "Documentation"))
      found.push_back((e.path() / "Documentation").string());
  }
  if (found.empty()) return {};
  // Newest kernel version: strverscmp orders linux-doc-6.10 after linux-doc-6.9.
  return *std::max_element(found.begin(), found.end(),
                           [](const std::string& a, const std::string& b) { return strverscmp(a.c_str(), b.c_str()) < 0; });
}

TextCorpus TextCorpus::load(const std::vector<std::string>& paths, TextSplit split,
                            const std::vector<std::string>& extensions) {
  GZ_CHECK(!paths.empty(), "text corpus: no paths given");
  std::vector<std::string> files;
  std::vector<std::string> docs;
  for (const auto& p : paths) {
    GZ_CHECK(fs::exists(p), "{}: text corpus path not found", p);
    if (fs::is_directory(p)) {
      std::string wiki = wikiTextFile(p, split);
      if (!wiki.empty() || !wikiTextFile(p, TextSplit::kTrain).empty()) {
        GZ_CHECK(!wiki.empty(), "{}: WikiText layout without wiki.valid.tokens (or wiki.valid.raw)", p);
        for (auto& d : splitWikiTextArticles(readText(wiki))) docs.push_back(std::move(d));
        continue;
      }
      std::vector<std::string> found;
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && hasTextExtension(e.path().filename().string(), extensions))
          found.push_back(e.path().string());
      GZ_CHECK(!found.empty(), "{}: no text files (extensions {})", p, fmt::join(extensions, " "));
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(p);
    }
  }

  // Files (not WikiText splits) are held out by index, so train and valid never share a document.
  if (files.size() == 1) {
    std::vector<std::string> lines = splitLines(readText(files[0]));
    // At least one line for training; an empty file leaves both splits empty (an error below).
    auto cut = size_t(double(lines.size()) * (1.0 - kSingleDocValidShare));
    cut = std::min(std::max<size_t>(cut, 1), lines.size());
    std::string doc;
    for (size_t i = (split == TextSplit::kTrain ? 0 : cut); i < (split == TextSplit::kTrain ? cut : lines.size()); ++i)
      doc += lines[i] + '\n';
    docs.push_back(std::move(doc));
  } else if (files.size() > 1) {
    for (size_t i = 0; i < files.size(); ++i) {
      bool valid = files.size() < kValidEvery ? i + 1 == files.size() : i % kValidEvery == kValidEvery - 1;
      if (valid == (split == TextSplit::kValid)) docs.push_back(readText(files[i]));
    }
  }
  TextCorpus c = fromDocuments(std::move(docs), fmt::format("{}", fmt::join(paths, ", ")));
  GZ_CHECK(c.bytes() > 0, "{}: the {} split of the text corpus is empty", c.source_,
           split == TextSplit::kTrain ? "train" : "valid");
  return c;
}

TextCorpus TextCorpus::fromDocuments(std::vector<std::string> documents, std::string source) {
  TextCorpus c;
  c.documents_ = std::move(documents);
  c.source_ = std::move(source);
  return c;
}

int64_t TextCorpus::bytes() const {
  int64_t n = 0;
  for (const auto& d : documents_) n += int64_t(d.size());
  return n;
}

uint64_t TextCorpus::fingerprint() const {
  Fnv1a64 h;  // util/Hash.h
  const unsigned char boundary = 0xff;  // a byte UTF-8 never uses marks each document boundary
  for (const auto& d : documents_) {
    h.update(d.data(), d.size());
    h.update(&boundary, 1);
  }
  return h.value();
}

std::string TextCorpus::describe() const {
  return fmt::format("{} documents, {:.1f} MB of text from {}", documents_.size(), double(bytes()) / 1e6, source_);
}

}  // namespace gradzip::data
