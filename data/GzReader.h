// Sequential reading of gzip-compressed (or plain) files through zlib's gz*
// API, turning zlib status codes into UserErrors that name the file. Used by the
// IDX reader and by TextCorpus for the linux-doc `.rst.gz` files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gradzip::data {

class GzReader {
 public:
  // Opens `path` (gzip or plain). Throws UserError if it cannot be opened.
  explicit GzReader(const std::string& path);
  ~GzReader();
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes into buf and returns how many were read: fewer than n only
  // at the end of the data. A corrupt or truncated gzip stream throws UserError
  // naming the file, the decompressed byte offset and zlib's message.
  size_t read(void* buf, size_t n);
  // True for gzip data, false for a plain file read through unchanged; known
  // only after the first read().
  bool compressed() const;
  // Decompressed bytes consumed so far.
  int64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* file_ = nullptr;  // gzFile
  int64_t offset_ = 0;
};

// Deflate's largest expansion, 1032:1 (zlib's technical notes): a gzip file of n
// bytes decompresses to at most n * kMaxGzipRatio bytes. Readers check sizes
// declared in a header against it before allocating.
inline constexpr int64_t kMaxGzipRatio = 1032;

// The whole decompressed content of `path` (gzip or plain).
std::string readGzFile(const std::string& path);

}  // namespace gradzip::data
