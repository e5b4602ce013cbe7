// Implements data/Idx.h: header validation and one bulk read of the payload.
#include "data/Idx.h"

#include "data/GzReader.h"
#include "util/Error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

namespace gradzip::data {
namespace {

constexpr uint8_t kTypeUbyte = 0x08;
// The IDX spec allows at most 255 dims; anything past a handful is a corrupt header.
constexpr int kMaxDims = 8;

uint32_t bigEndian32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

IdxArray readIdx(const std::string& path) {
  GzReader in(path);
  uint8_t magic[4];
  size_t got = in.read(magic, 4);
  GZ_CHECK(got == 4, "{}: truncated at byte {}: an IDX file starts with a 4-byte magic number", path, got);
  GZ_CHECK(magic[0] == 0 && magic[1] == 0,
           "{}: bad magic 0x{:02x}{:02x}{:02x}{:02x}: an IDX file starts with two zero bytes "
           "(is this an IDX file?)",
           path, magic[0], magic[1], magic[2], magic[3]);
  GZ_CHECK(magic[2] == kTypeUbyte,
           "{}: unsupported IDX element type 0x{:02x} (only 0x08, unsigned byte, is supported)", path,
           magic[2]);
  int ndims = magic[3];
  GZ_CHECK(ndims >= 1 && ndims <= kMaxDims, "{}: bad magic: {} dimensions (expected 1 to {})", path, ndims,
           kMaxDims);

  uint8_t header[4 * kMaxDims];
  got = in.read(header, 4 * ndims);
  GZ_CHECK(got == size_t(4 * ndims), "{}: truncated at byte {}: the header declares {} dimensions ({} bytes)",
           path, 4 + got, ndims, 4 + 4 * ndims);
  IdxArray out;
  int64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    int64_t d = bigEndian32(header + 4 * i);
    out.dims.push_back(d);
  }
  // The product of the non-zero dimensions bounds every stride of the tensor
  // (at::empty fails on strides past int64 even when a zero dimension leaves it
  // empty). 2^40 is far past any dataset; checking before multiplying keeps the
  // product from overflowing.
  int64_t extent = 1;
  for (int64_t d : out.dims) {
    const int64_t f = std::max<int64_t>(d, 1);
    GZ_CHECK(extent <= (int64_t(1) << 40) / f, "{}: wrong dimensions {}: implausibly large", path, out.dims);
    extent *= f;
    total *= d;
  }
  // Check the declared size against what the file can hold before allocating it: a
  // corrupt header must not make us reserve terabytes.
  const int64_t headerBytes = 4 + 4 * ndims;
  const auto fileBytes = int64_t(std::filesystem::file_size(path));
  if (in.compressed()) {
    GZ_CHECK(total <= fileBytes * kMaxGzipRatio,
             "{}: wrong dimensions {}: they need {} data bytes, more than a {}-byte gzip file can hold "
             "(corrupt header or truncated file)",
             path, out.dims, total, fileBytes);
  } else {
    GZ_CHECK(headerBytes + total <= fileBytes,
             "{}: truncated at byte {}: dimensions {} need {} data bytes after the {}-byte header ({} bytes in all)",
             path, fileBytes, out.dims, total, headerBytes, headerBytes + total);
  }

  out.data = at::empty(out.dims, at::kByte);
  got = in.read(out.data.data_ptr<uint8_t>(), size_t(total));
  GZ_CHECK(int64_t(got) == total,
           "{}: truncated at byte {}: dimensions {} need {} data bytes after the {}-byte header ({} bytes in all)",
           path, headerBytes + int64_t(got), out.dims, total, headerBytes, headerBytes + total);
  uint8_t extra;
  GZ_CHECK(in.read(&extra, 1) == 0,
           "{}: wrong dimensions {}: the file has more than the {} bytes they declare (header + data)", path,
           out.dims, headerBytes + total);
  return out;
}

}  // namespace gradzip::data
