// FNV-1a, 64 bit: a small, dependency-free hash for integrity checks that need
// no cryptographic strength (checkpoint sidecars, config fingerprints).
#pragma once

#include <cstddef>
#include <cstdint>

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

}  // namespace gradzip
