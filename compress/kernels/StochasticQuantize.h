// Stochastic quantisation (SQ) onto a monotone integer table, shared by THC and
// the dithering compressors. A value y in [T(z), T(z+1)] rounds up to T(z+1)
// with probability (y − T(z))/(T(z+1) − T(z)), else down to T(z) -- unbiased,
// with variance (y − T(z))(T(z+1) − y). (THC §4 and App. A.2 print the two
// probabilities swapped; this is the unbiased assignment.) Noise comes from
// the counter stream compress/kernels/CounterRng.h, so workers with distinct seeds
// draw independent noise (THC requires it).
#pragma once

#include <cmath>
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
  // chosen value into codes[k]: with c = min(floor(y), g − 1), z = cells()[c],
  // up iff u·(T(z+1) − T(z)) < y − T(z) in float, u = uniform01Half(seed,
  // offset + k) (half a counter word per coordinate, as quantizeUniform).
  // THC's fused kernel (compress/kernels/ThcTableKernels.h) computes exactly this.
  void quantize(const float* y, int64_t n, uint64_t seed, int64_t offset, uint8_t* codes) const;

  // cells()[c]: z with T(z) <= c < T(z+1), for c in [0, g).
  const std::vector<uint8_t>& cells() const { return cell_; }

 private:
  std::vector<int> table_;
  std::vector<uint8_t> cell_;
};

// Uniform SQ of y to floor(y) or floor(y)+1 with the 24-bit uniform integer
// k (u = k/2^24, uniform01Half's grid): up iff k < ceil(2^24·(y − floor(y))),
// i.e. with probability ceil(2^24·frac)/2^24, within 2^-24 above frac (the
// same as u < frac, with frac taken exactly). As one integer expression,
// c = floor((ceil(2^24·y) + 2^24 − 1 − k) / 2^24): ceil(2^24·y) is
// 2^24·floor(y) + ceil(2^24·frac), and adding 2^24 − 1 − k carries into the
// 2^24 digit exactly when k < ceil(2^24·frac). THC's kernels compute this form
// (ThcKernels.cpp, ThcBlock512.cpp). Exact for |y| < 2^38.
inline int32_t roundUniform(float y, uint32_t k) {
  const int64_t yc = static_cast<int64_t>(std::ceil(static_cast<double>(y) * 16777216.0));  // exact
  return static_cast<int32_t>((yc + (16777215 - static_cast<int64_t>(k))) >> 24);  // floor division
}

// roundUniform of y[k] (callers clamp to their range) with k = the upper 24
// bits of half-word offset + k of the stream (uniform01Half: two coordinates
// per counter word; THC's fused kernels draw the same numbers).
void quantizeUniform(const float* y, int64_t n, uint64_t seed, int64_t offset, int32_t* out);

}  // namespace gradzip::compress
