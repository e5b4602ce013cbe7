// Stochastic quantisation (SQ) onto a monotone integer table, shared by THC and
// the dithering compressors. A value y in [T(z), T(z+1)] rounds up to T(z+1)
// with probability (y − T(z))/(T(z+1) − T(z)), else down to T(z) -- unbiased,
// with variance (y − T(z))(T(z+1) − y). (THC §4 and App. A.2 print the two
// probabilities swapped; this is the unbiased assignment.) Noise comes from
// the counter stream compress/CounterRng.h, so workers with distinct seeds
// draw independent noise (THC requires it).
#pragma once

#include <cstdint>
#include <vector>

namespace gradzip::compress {

// SQ onto T = table[0..K-1] (strictly increasing integers, table[0] = 0,
// table[K-1] = g). Precomputes the interval of every unit cell of [0, g].
class TableQuantizer {
 public:
  explicit TableQuantizer(std::vector<int> table);
  int granularity() const { return table_.back(); }
  const std::vector<int>& table() const { return table_; }

  // y[k] (k < n) must lie in [0, g] (callers clamp). Writes the index z of the
  // chosen value into codes[k]; noise: uniform01(seed, offset + k).
  void quantize(const float* y, int64_t n, uint64_t seed, int64_t offset, uint8_t* codes) const;

 private:
  std::vector<int> table_;
  std::vector<uint8_t> cell_;  // cell_[c]: z with T(z) <= c < T(z+1), c in [0, g)
};

// Uniform SQ of y (any real, callers clamp to their range) to the integers
// floor(y) or floor(y)+1; noise: uniform01Half(seed, offset + k) (two
// coordinates per counter word; THC's fused kernels draw the same numbers).
void quantizeUniform(const float* y, int64_t n, uint64_t seed, int64_t offset, int32_t* out);

}  // namespace gradzip::compress
