// FNV-1a, 64 bit: a small, dependency-free hash for integrity checks that need
// no cryptographic strength (checkpoint sidecars, config fingerprints, the
// executable a run was trained with).
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
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
  uint64_t h_ = 1469598103934665603ULL;
};

// FNV-1a of a file's bytes as 16 hex digits; "" when it cannot be read.
inline std::string fileFingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  Fnv1a64 h;
  std::vector<char> buf(1 << 16);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0)
    h.update(buf.data(), static_cast<size_t>(in.gcount()));
  return fmt::format("{:016x}", h.value());
}

}  // namespace gradzip
