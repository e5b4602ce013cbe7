// Implements compress/kernels/StochasticQuantize.h; the loops run in parallel chunks,
// and the counter-based noise keeps results independent of the chunking.
#include "compress/kernels/StochasticQuantize.h"

#include "compress/kernels/CounterRng.h"
#include "util/Error.h"

#include <ATen/Parallel.h>

#include <cmath>

namespace gradzip::compress {

TableQuantizer::TableQuantizer(std::vector<int> table) : table_(std::move(table)) {
  GZ_CHECK(table_.size() >= 2 && table_.size() <= 256, "TableQuantizer: need 2..256 table entries, got {}",
           table_.size());
  GZ_CHECK(table_.front() == 0, "TableQuantizer: T(0) must be 0");
  for (size_t z = 0; z + 1 < table_.size(); ++z)
    GZ_CHECK(table_[z] < table_[z + 1], "TableQuantizer: table must be strictly increasing");
  cell_.resize(table_.back());
  for (size_t z = 0; z + 1 < table_.size(); ++z)
    for (int c = table_[z]; c < table_[z + 1]; ++c) cell_[c] = static_cast<uint8_t>(z);
}

namespace {

// TableQuantizer::quantize of y[b, e) (cell: the unit cells' intervals, table:
// T), compiled for AVX-512, AVX2 and baseline x86-64 (the noise vectorises).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void quantizeTableRange(const float* __restrict y, int64_t b, int64_t e, const uint8_t* __restrict cell,
                        const int* __restrict table, int g, uint64_t seed, int64_t offset,
                        uint8_t* __restrict codes) {
  for (int64_t k = b; k < e; ++k) {
    const float v = y[k];
    const int c = std::min(static_cast<int>(v), g - 1);  // v >= 0, so truncation is floor
    const int z = cell[c];
    const float lo = static_cast<float>(table[z]);
    const float hi = static_cast<float>(table[z + 1]);
    // Round up with probability (v − lo)/(hi − lo): u < that fraction.
    const bool up = uniform01Half(seed, static_cast<uint64_t>(offset + k)) * (hi - lo) < (v - lo);
    codes[k] = static_cast<uint8_t>(z + (up ? 1 : 0));
  }
}

}  // namespace

void TableQuantizer::quantize(const float* y, int64_t n, uint64_t seed, int64_t offset, uint8_t* codes) const {
  const int g = table_.back();
  at::parallel_for(0, n, 16384, [&](int64_t b, int64_t e) {
    quantizeTableRange(y, b, e, cell_.data(), table_.data(), g, seed, offset, codes);
  });
}

void quantizeUniform(const float* y, int64_t n, uint64_t seed, int64_t offset, int32_t* out) {
  at::parallel_for(0, n, 16384, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k)
      out[k] = roundUniform(y[k], static_cast<uint32_t>(randomHalf(seed, static_cast<uint64_t>(offset + k)) >> 8));
  });
}

}  // namespace gradzip::compress
