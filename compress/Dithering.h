// Random dithering (natural-compression paper, Definition 3, "general
// dithering" with C = identity), the shared engine of standard dithering
// (QSGD, compress/Qsgd.h) and natural dithering (compress/NaturalDithering.h):
// y_i = |x_i| / ||x||_p lies between two adjacent levels l_{u+1} <= y_i <= l_u
// of the level set {0 = l_s < ... < l_0 = 1}; it rounds up to l_u with
// probability (y_i − l_{u+1})/(l_u − l_{u+1}), else down (unbiased). Output:
// ||x||_p · sign(x_i) · ξ(y_i).
//
// Wire: a float32 norm header, then per coordinate a sign bit and a level index
// of ceil(log2(s+1)) bits, packed (compress/BitPack.h):
//   bits/coordinate = 8·(4 + ceil(d·(1 + ceil(log2(s+1)))/8)) / d exactly.
// Aggregation: all-gather of the payloads, every rank decodes all of them and
// averages in rank order (not summable: each worker has its own norm).
#pragma once

#include "compress/Compressor.h"

#include <string>
#include <vector>

namespace gradzip::compress {

class Dithering : public Compressor {
 public:
  // `levels`: ascending, levels.front() = 0, levels.back() = 1 (s + 1 values);
  // pNorm >= 1 (infinity allowed).
  Dithering(std::string name, std::vector<float> levels, double pNorm);

  std::string name() const override { return name_; }
  Capabilities capabilities() const override;
  double bitsPerCoordinate(int64_t d, int n) const override;
  Aggregated aggregate(const at::Tensor& x, Context& ctx) override;
  Payload encode(const at::Tensor& x, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override;

  const std::vector<float>& levels() const { return levels_; }
  double pNorm() const { return pNorm_; }
  int codeBits() const { return codeBits_; }
  // ||x||_p as the encoder computes it (double accumulation, rounded to float).
  float normOf(const at::Tensor& x) const;

 private:
  // One uint8 message: 4 bytes of norm, then the packed codes.
  at::Tensor encodeMessage(const at::Tensor& x, uint64_t seed) const;
  at::Tensor decodeMessage(const at::Tensor& msg, int64_t d) const;
  int64_t messageBytes(int64_t d) const;

  std::string name_;
  std::vector<float> levels_;
  double pNorm_;
  int indexBits_, codeBits_;
  int64_t agreedNumel_ = -1;  // d confirmed equal on every rank (checkSameNumelAcrossRanks)
};

// "2" -> 2.0, "inf" -> +infinity; other values must be numbers >= 1.
double parseNormOrder(const std::string& text, const std::string& who);

}  // namespace gradzip::compress
