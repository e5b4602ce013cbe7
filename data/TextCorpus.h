// A text corpus in memory: the documents of one split, gathered from files and
// directories. Sources: the Linux kernel documentation of Debian's linux-doc (the
// `.rst.gz` files under /usr/share/doc/linux-doc-*/Documentation, decompressed
// through zlib; the default corpus), any plain text files (.txt, .raw, .tokens,
// .rst; gzipped ones when their suffix is listed), and the WikiText-103 layout (a directory holding
// wiki.{train,valid,test}.{tokens,raw}, split into articles at its " = Title = "
// lines).
//
// Splits: a WikiText directory provides its own train/valid files. Otherwise the
// sorted documents are split deterministically: every 50th (i % 50 == 49) goes to
// validation, or the last one when there are fewer than 50; a single document
// gives its last 2% of lines to validation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::data {

enum class TextSplit { kTrain, kValid };

// Default file name suffixes collected from directories: .rst.gz, .rst, .txt,
// .raw, .tokens. A file whose name ends in ".gz" is decompressed whatever the
// suffix list; add e.g. ".txt.gz" to collect gzipped text files.
const std::vector<std::string>& defaultTextExtensions();

// The newest /usr/share/doc/linux-doc-*/Documentation, or "" if none is installed.
std::string defaultTextCorpusPath();

class TextCorpus {
 public:
  // Gathers the `split` documents of every path (file or directory, in the given
  // order; directory contents sorted). Gzip files are decompressed (zlib
  // recognises them by content). Throws UserError naming the path for a missing path, an
  // unreadable or corrupt file, or a corpus without any text.
  static TextCorpus load(const std::vector<std::string>& paths, TextSplit split,
                         const std::vector<std::string>& extensions = defaultTextExtensions());
  // A corpus from in-memory documents (tests).
  static TextCorpus fromDocuments(std::vector<std::string> documents, std::string source);

  const std::vector<std::string>& documents() const { return documents_; }
  int64_t bytes() const;
  // FNV-1a 64 over every document and its boundaries: the cache key of models and
  // encoded ids trained or computed from this corpus.
  uint64_t fingerprint() const;
  std::string describe() const;

 private:
  std::vector<std::string> documents_;
  std::string source_;
};

}  // namespace gradzip::data
