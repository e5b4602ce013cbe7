// The saturating b-bit aggregation of the end-to-end-utility paper §3.2.2,
// Sat(x, y) = min(2^(b−1)−1, max(−2^(b−1)+1, x + y)), applied directly to
// packed words so that the all-reduce moves exactly b bits per coordinate at
// every hop. Codes are signed, zero-centred values c in [−L, L], L = 2^(b−1)−1,
// stored offset as c + L in b-bit fields. When b divides 8 the words are uint8
// (8/b codes each); otherwise int32 words hold floor(32/b) codes (no code
// straddles a word, so collectives may split the tensor at any element).
// The reduction counts clip events (a coordinate whose partial sum left [−L, L]
// at some hop) on the rank that performed the combine and, when asked, keeps
// what each clip removed, s − Sat(s), at the coordinate it hit: the result is
// Σ_i c_i − Σ_combines (s − Sat(s)), so those losses are exactly what the
// saturating sum lost, and THC's error feedback gives them back (compress/Thc.h).
#pragma once

#include "comm/Reduction.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace gradzip::compress {

class SaturatingPackedSum : public comm::Reduction {
 public:
  // 2 <= bits <= 16. With recordLosses, combine() also records its clips'
  // losses for losses() (a little memory per clip event; off by default).
  explicit SaturatingPackedSum(int bits, bool recordLosses = false);

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

  // What this object's combines clipped, per coordinate, as int32 [n]: the sum
  // of s − Sat(s) over its clips of coordinate k (0 where it clipped nothing),
  // in code units. `result` is the word tensor the collective returned. Needs
  // recordLosses, and that every combine folded into a slice of `result`, as
  // the ring, tree and parameter-server all-reduces do (comm/Reduction.h: acc
  // may be a slice of the accumulator); GZ_ASSERT otherwise.
  at::Tensor losses(const at::Tensor& result, int64_t n) const;

 private:
  // combine() on host words `acc`, recording its clips at `position` (acc's
  // own address, or the device words' it stands in for).
  void combineAt(at::Tensor& acc, const at::Tensor& o, const void* position) const;
  // The clips of one combine: where its acc began, and (code index within
  // acc, s − Sat(s)) for each clip.
  struct Clips {
    const void* acc = nullptr;
    std::vector<std::pair<int64_t, int32_t>> at;
  };
  int bits_;
  bool recordLosses_;
  mutable std::atomic<int64_t> clipped_{0};
  mutable std::mutex mu_;  // guards clips_: collectives may combine segments on several threads
  mutable std::vector<Clips> clips_;
};

}  // namespace gradzip::compress
