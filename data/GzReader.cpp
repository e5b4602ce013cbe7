// Implements data/GzReader.h over zlib's gzopen/gzread.
#include "data/GzReader.h"

#include "util/Error.h"

#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

namespace gradzip::data {

GzReader::GzReader(const std::string& path) : path_(path) {
  GZ_CHECK(std::filesystem::is_regular_file(path), "{}: no such file", path);
  gzFile f = gzopen(path.c_str(), "rb");
  GZ_CHECK(f != nullptr, "{}: cannot open: {}", path, std::strerror(errno));
  // A 1 MiB input buffer: zlib's 8 KiB default makes 47 MB of Fashion-MNIST
  // noticeably slower through extra read() calls.
  gzbuffer(f, 1 << 20);
  file_ = f;
}

GzReader::~GzReader() {
  if (file_) gzclose(static_cast<gzFile>(file_));
}

bool GzReader::compressed() const { return gzdirect(static_cast<gzFile>(file_)) == 0; }

size_t GzReader::read(void* buf, size_t n) {
  auto* out = static_cast<char*>(buf);
  size_t done = 0;
  while (done < n) {
    // gzread takes an unsigned length and returns int: read in chunks below INT_MAX.
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    int got = gzread(static_cast<gzFile>(file_), out + done, chunk);
    int errnum = Z_OK;
    const char* msg = gzerror(static_cast<gzFile>(file_), &errnum);
    // A truncated stream returns the bytes it could decode and sets Z_BUF_ERROR.
    if (got < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
      GZ_CHECK(false, "{}: corrupt or truncated gzip data at decompressed byte {}: {}", path_,
               offset_ + done + std::max(got, 0), msg ? msg : "unknown zlib error");
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  offset_ += static_cast<int64_t>(done);
  return done;
}

std::string readGzFile(const std::string& path) {
  GzReader in(path);
  std::string out;
  // Grow geometrically; most text files decompress to 3-5x their size.
  size_t fileSize = std::filesystem::file_size(path);
  out.resize(std::max<size_t>(fileSize * 4, 4096));
  size_t used = 0;
  while (true) {
    if (used == out.size()) out.resize(out.size() * 2);
    size_t got = in.read(out.data() + used, out.size() - used);
    used += got;
    if (used < out.size()) break;
  }
  out.resize(used);
  return out;
}

}  // namespace gradzip::data
