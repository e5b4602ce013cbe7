// Random dithering (natural-compression paper, Definition 3, "general
// dithering" with C = identity), the shared engine of standard dithering
// (QSGD, compress/Qsgd.h) and natural dithering (compress/NaturalDithering.h):
// y_i = |x_i| / ||x||_p lies between two adjacent levels l_{u+1} <= y_i <= l_u
// of the level set {0 = l_s < ... < l_0 = 1}; it rounds up to l_u with
// probability (y_i − l_{u+1})/(l_u − l_{u+1}), else down (unbiased). Output:
// ||x||_p · sign(x_i) · ξ(y_i).
//
// Buckets: the norm is taken per bucket of B consecutive coordinates (B =
// `bucket`; 0 = the whole message is one bucket, Definition 3 as written).
// QSGD (Alistarh et al. 2017, "bucketing") quantises buckets of d = 512 in
// its 4-bit experiments: one norm over 2^18+ coordinates makes most |x_i|/‖x‖
// fall below the first level 1/s, and the variance grows as √d (Lemma 3.1:
// ω = min(d/s², √d/s)), so with buckets ω is that of d = B.
// Wire: k = ceil(d/B) float32 norm headers, then per coordinate a sign bit and
// a level index of ceil(log2(s+1)) bits, packed (compress/kernels/BitPack.h):
//   bits/coordinate = 8·(4k + ceil(d·(1 + ceil(log2(s+1)))/8)) / d exactly.
// Aggregation (not summable: each worker has its own norm), two forms:
//  "allgather" (default): every rank receives every rank's message, decodes
//        all of them and averages in rank order;
//  "ps": the parameter-server form of the natural-compression paper's
//        bidirectional compression (Algorithm 1, as C_nat's ps form): the
//        vector is cut into n shards, each dithered with its own norm header
//        and sent to its owner (compress/ShardedExchange.h); the owner decodes
//        the n contributions, sums them in double in rank order (no common
//        integer unit exists across workers' norms, so not C_nat's int64),
//        divides by n, dithers the mean again with a fresh norm and sends that
//        message back. Unbiased (a composition of unbiased steps).
//  "ring": the ring all-reduce with decompress-add-recompress at every hop
//        that GradiVeQ (§1, Fig. 2(a); §4 "4-bit-QSGD RAR") describes for
//        scalar quantisers: n segments; at each reduce-scatter hop a rank
//        decodes the incoming partial sum, adds its own segment in float and
//        dithers the result again; the n fully reduced segment messages then
//        travel the ring unchanged, so every rank decodes the same bytes.
//        n − 1 requantisations of partial sums make it noisier than the other
//        two; it is the form GradiVeQ's sampling iterations use.
// The collective comes from Context::collectiveName ("ps", "allgather" or
// "ring"), else from the deployment option.
// Codec paths (compress/CodecPath.h): the CPU loop or the device-generic ATen
// codec (compress/DitheringGeneric.cpp), which draws the same counter-based
// noise and writes the same bytes; every aggregation keeps its tensors on x's
// device and calls the same communication on either path.
#pragma once

#include "compress/Compressor.h"

#include <string>
#include <vector>

namespace gradzip::compress {

class Dithering : public Compressor {
 public:
  // `levels`: ascending, levels.front() = 0, levels.back() = 1 (s + 1 values);
  // pNorm >= 1 (infinity allowed).
  // bucket: coordinates per norm (0: the whole message).
  Dithering(std::string name, std::vector<float> levels, double pNorm, std::string deployment = "allgather",
            int64_t bucket = 0);

  std::string name() const override { return name_; }
  Capabilities capabilities() const override;
  // allgather: one norm header + packed codes; ps and ring: n segment
  // messages (a norm header each), so 32n/d instead of 32/d for the headers
  // (ring: what each rank puts into each of its 2(n − 1) hops, summed over the
  // n segments, i.e. the same per-coordinate rate as one full message).
  double bitsPerCoordinate(int64_t d, int n) const override;
  Aggregated aggregate(const at::Tensor& x, Context& ctx) override;
  Payload encode(const at::Tensor& x, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override;

  const std::vector<float>& levels() const { return levels_; }
  double pNorm() const { return pNorm_; }
  const std::string& deployment() const { return deployment_; }
  int codeBits() const { return codeBits_; }
  int64_t bucket() const { return bucket_; }
  // Coordinates per bucket in a message of d coordinates (d when bucket = 0).
  int64_t bucketLength(int64_t d) const;
  // ||x_b||_p of every bucket b of x as the encoder computes them (double
  // accumulation, rounded to float), on x's device; one 0 for an empty x.
  at::Tensor bucketNorms(const at::Tensor& x) const;

 private:
  // One uint8 message: 4 bytes of norm per bucket, then the packed codes.
  // `fast`: the CPU loop (x on the CPU); else the device-generic ATen codec
  // (compress/DitheringGeneric.cpp) on x's device, which writes the same bytes.
  at::Tensor encodeMessage(const at::Tensor& x, uint64_t seed, bool fast) const;
  at::Tensor decodeMessage(const at::Tensor& msg, int64_t d, bool fast) const;
  at::Tensor encodeMessageGeneric(const at::Tensor& x, uint64_t seed) const;
  at::Tensor decodeMessageGeneric(const at::Tensor& msg, int64_t d) const;
  // levels_ as a float tensor on `device`.
  at::Tensor levelsOn(const at::Device& device) const;
  int64_t messageBytes(int64_t d) const;
  // The aggregations keep every tensor on x's device; `fast` picks the codec.
  Aggregated aggregateAllGather(const at::Tensor& x, Context& ctx, bool fast);
  Aggregated aggregatePs(const at::Tensor& x, Context& ctx, bool fast);
  Aggregated aggregateRing(const at::Tensor& x, Context& ctx, bool fast);

  std::string name_;
  std::vector<float> levels_;
  double pNorm_;
  std::string deployment_;  // "allgather" | "ps" | "ring"
  int64_t bucket_;          // coordinates per norm; 0 = whole message
  int indexBits_, codeBits_;
  int64_t agreedNumel_ = -1;  // d confirmed equal on every rank (checkSameNumelAcrossRanks)
};

// "2" -> 2.0, "inf" -> +infinity; other values must be numbers >= 1.
double parseNormOrder(const std::string& text, const std::string& who);

}  // namespace gradzip::compress
