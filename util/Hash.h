// FNV-1a, 64 bit: a small, dependency-free hash for integrity checks that need
// no cryptographic strength (checkpoint sidecars, config fingerprints, the
// executable a run was trained with).
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace gradzip {

class Fnv1a64 {
 public:
  void update(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 1099511628211ULL;
    }
  }
  uint64_t value() const { return h_; }

 private:
  // The FNV-1a 64 offset basis, as the published test vectors require
  // (tests/util/HashTest.cpp). Checkpoints store this hash: any other basis
  // makes every earlier checkpoint fail its size/hash check on resume.
  uint64_t h_ = 14695981039346656037ULL;
};

// A file's size and FNV-1a, read in 1 MiB blocks; {0, 0} when it cannot be opened.
inline std::pair<uint64_t, uint64_t> fileSizeAndHash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {0, 0};
  Fnv1a64 h;
  uint64_t n = 0;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = in.gcount();
    h.update(buf.data(), static_cast<size_t>(got));
    n += static_cast<uint64_t>(got);
  }
  return {n, h.value()};
}

// fileSizeAndHash's hash as 16 hex digits; "" when the file cannot be read
// (FNV-1a never hashes to 0 at size 0: its offset basis is not 0).
inline std::string fileFingerprint(const std::string& path) {
  const auto [size, hash] = fileSizeAndHash(path);
  return size == 0 && hash == 0 ? "" : fmt::format("{:016x}", hash);
}

}  // namespace gradzip
