// Small generated data files for the data/ tests: gzip and plain writers, IDX
// and CIFAR-10 record builders. Header-only (not a *Test.cpp, so not a test).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace gradzip::data::testing {

inline void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline void writeGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot open " + path);
  if (!bytes.empty() && gzwrite(f, bytes.data(), unsigned(bytes.size())) != int(bytes.size()))
    throw std::runtime_error("gzwrite failed on " + path);
  gzclose(f);
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// An IDX file of unsigned bytes: magic 0 0 0x08 ndims, big-endian dims, data.
inline std::string idxBytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
                            uint8_t type = 0x08) {
  std::string s = {0, 0, char(type), char(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(char((d >> shift) & 0xff));
  s.append(data.begin(), data.end());
  return s;
}

// Deterministic pixel value for image n at (y, x, c), distinct across small n.
inline uint8_t pixel(int64_t n, int64_t y, int64_t x, int64_t c) {
  return uint8_t((n * 37 + y * 11 + x * 5 + c * 83) % 256);
}

}  // namespace gradzip::data::testing
