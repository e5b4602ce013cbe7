// Reader of the IDX format (LeCun's MNIST container, also used by Fashion-MNIST),
// plain or gzip-compressed: a 4-byte magic {0, 0, type, ndims}, ndims big-endian
// uint32 sizes, then the row-major elements. Only type 0x08 (unsigned byte) is
// supported, which covers every MNIST-family file. Reads through zlib (gzread
// also reads uncompressed files unchanged).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::data {

struct IdxArray {
  std::vector<int64_t> dims;  // sizes from the header, outermost first
  at::Tensor data;            // uint8 tensor of shape `dims`
};

// Reads one IDX file. Throws UserError naming the file and the problem: missing
// file, gzip corruption, bad magic, unsupported element type, truncated at byte
// N (of the decompressed stream) or extra bytes after the declared data.
IdxArray readIdx(const std::string& path);

}  // namespace gradzip::data
