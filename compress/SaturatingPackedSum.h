// The saturating b-bit aggregation of the end-to-end-utility paper §3.2.2,
// Sat(x, y) = min(2^(b−1)−1, max(−2^(b−1)+1, x + y)), applied directly to
// packed words so that the all-reduce moves exactly b bits per coordinate at
// every hop. Codes are signed, zero-centred values c in [−L, L], L = 2^(b−1)−1,
// stored offset as c + L in b-bit fields. When b divides 8 the words are uint8
// (8/b codes each); otherwise int32 words hold floor(32/b) codes (no code
// straddles a word, so collectives may split the tensor at any element).
// The reduction counts clip events (a coordinate whose partial sum left [−L, L]
// at some hop) on the rank that performed the combine.
#pragma once

#include "comm/Reduction.h"

#include <atomic>
#include <cstdint>

namespace gradzip::compress {

class SaturatingPackedSum : public comm::Reduction {
 public:
  explicit SaturatingPackedSum(int bits);  // 2 <= bits <= 16

  // Word layout for `bits`.
  static at::ScalarType wordType(int bits);
  static int codesPerWord(int bits);
  static int64_t numWords(int64_t n, int bits);
  // Packs signed codes (int32, in [−L, L]) into words, and back.
  static at::Tensor pack(const at::Tensor& codes, int bits);
  static at::Tensor unpack(const at::Tensor& words, int bits, int64_t n);

  std::string name() const override;
  at::ScalarType accType(at::ScalarType in) const override;
  at::Tensor lift(const at::Tensor& raw) const override;
  void combine(at::Tensor& acc, const at::Tensor& other) const override;

  // Clip events counted by this object's combine() calls so far.
  int64_t clipped() const { return clipped_.load(); }

 private:
  int bits_;
  mutable std::atomic<int64_t> clipped_{0};
};

}  // namespace gradzip::compress
