// Natural compression C_nat (natural-compression paper, Definition 1): every
// float becomes a signed power of two, 2^a or 2^(a+1) around |t|, chosen
// without bias (probability of 2^a is (2^(a+1) − |t|)/2^a), computed on the
// binary32 bits: keep sign and exponent, round the exponent up with probability
// mantissa/2^23. A deterministic variant rounds to the nearest power of two
// (the paper's reference "deterministic rounding" arm; biased).
//
// Wire format (the paper's implementation): one byte per coordinate,
//   bit 7 = sign, bit 6 = non-zero flag, bits 0–5 = e + 50, e ∈ [−50, 10].
// Values below 2^−50 round without bias to 0 or 2^−50; exponents above 10 are
// clipped to 2^10 (biased; counted in Aggregated::saturated).
//
// Aggregation (not ring compatible: a sum of powers of two is not one):
//  "ps": 8-bit uplink to the shard owners (compress/ShardedExchange.h), which
//        sum the exact integers ±2^(e+50) in int64 (saturating, counted),
//        re-compress the mean with C_nat and send 8-bit codes back (the paper's
//        bidirectional compression, Algorithm 1);
//  "allgather": every rank receives every rank's codes and averages them.
// The collective comes from Context::collectiveName ("ps" or "allgather"),
// else from the options' deployment.
//
// Codec paths (compress/CodecPath.h): the CPU kernels (compress/kernels/
// NaturalKernels.h) or the device-generic ATen codec. They compute the same
// code from the same random bits, but the generic encoder draws its bits from
// the counter RNG rather than AES (see encodeCodesGeneric): the deterministic
// variant and the ps owner's re-compression give the same bits on both paths,
// the stochastic uplink the same distribution.
#pragma once

#include "compress/Compressor.h"
#include "compress/kernels/AesNoise.h"
#include "util/Yaml.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::compress {

constexpr int kNatMinExp = -50;
constexpr int kNatMaxExp = 10;

// C_nat on the bits with 23 random bits r ∈ [0, 2^23): (bits(t) + r) & 0xFF800000.
// ±0 stays ±0; subnormals round without bias to ±0 or ±2^−126 (the carry does it);
// ±inf and NaN pass through unchanged; a carry out of the largest exponent
// (|t| > 2^127) saturates at ±2^127 instead of becoming inf (biased).
float naturalRound(float t, uint32_t r);
// Deterministic variant: the nearest power of two (ties up), r = 2^22.
float naturalRoundNearest(float t);

// Wire code of C_nat(t) for finite t (see the file comment); the low 23 bits of
// `rnd` are the randomness: r for Definition 1 on the bits, or, below 2^−50,
// the uniform r/2^23 (round up iff r/2^23 < |t|/2^−50, probability within
// 2^−23 of the exact one). Sets *clipped when the exponent exceeded 10.
uint8_t naturalEncode(float t, uint64_t rnd, bool stochastic, bool* clipped = nullptr);
float naturalDecode(uint8_t code);
// The randomness of coordinate i in stream `seed`: 32-bit word i mod 4 of
// noise block i / 4 (compress/kernels/AesNoise.h: two AES rounds over splitmix64's
// states).
inline uint64_t naturalNoise(uint64_t seed, uint64_t i) { return aesnoise::word(seed, i); }
// The code as an exact integer in units of 2^−50: ±2^(e+50), or 0.
int64_t naturalFixed(uint8_t code);

struct NaturalCompressionOptions {
  bool deterministic = false;   // nearest power of two instead of stochastic rounding
  std::string deployment = "ps";  // "ps" | "allgather" (used when the context does not name one)

  static NaturalCompressionOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& node) const;
};

class NaturalCompression : public Compressor {
 public:
  explicit NaturalCompression(NaturalCompressionOptions options);

  std::string name() const override { return "cnat"; }
  Capabilities capabilities() const override;
  // Exactly 8: one byte per coordinate, no header.
  double bitsPerCoordinate(int64_t d, int n) const override;
  Aggregated aggregate(const at::Tensor& x, Context& ctx) override;
  Payload encode(const at::Tensor& x, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override;

 private:
  // C_nat codes of x; rejects non-finite x
  // in the same pass (UserError). Adds the 2^10 clips to *clipped when set.
  // Noise of coordinate i: naturalNoise(seed, i) (one 128-bit noise block
  // serves four coordinates: C_nat needs 23 random bits each).
  at::Tensor encodeCodes(const at::Tensor& x, uint64_t seed, int64_t* clipped);
  // Decoded floats of contiguous codes, into *cache when it is free (simd::reusableBuffer).
  static at::Tensor decodeCodes(const at::Tensor& codes, at::Tensor* cache = nullptr);
  // The device-generic codec (compress/NaturalCompressionGeneric.cpp) on x's
  // device: the same code for the same 23 random bits, but coordinate i's
  // bits come from randomHalf(seed, i) (compress/kernels/CounterRngGeneric.h),
  // not from the AES noise, so stochastic codes differ from the CPU kernel's
  // (same distribution); deterministic codes are identical.
  at::Tensor encodeCodesGeneric(const at::Tensor& x, uint64_t seed, int64_t* clipped) const;
  static at::Tensor decodeCodesGeneric(const at::Tensor& codes);
  // The ps owner's downlink for shard [offset, offset + len) from the n
  // received code vectors, on their device: the CPU owner's bytes exactly.
  at::Tensor ownerReduceGeneric(const std::vector<at::Tensor>& recv, int64_t offset, int64_t len, int n,
                                uint64_t ownerSeed) const;
  // `fast`: the CPU kernels; else the generic codec, every tensor on x's device.
  Aggregated aggregatePs(const at::Tensor& x, Context& ctx, bool fast);
  Aggregated aggregateAllGather(const at::Tensor& x, Context& ctx, bool fast);

  NaturalCompressionOptions options_;
  int64_t agreedNumel_ = -1;  // d confirmed equal on every rank (checkSameNumelAcrossRanks)
  at::Tensor codeCache_, meanCache_;  // reused output buffers (simd::reusableBuffer)
};

}  // namespace gradzip::compress
