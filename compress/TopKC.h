// TopKC, "TopK Chunked": the end-to-end-utility paper's all-reduce-compatible
// TopK (§3.1.2). The gradient is cut into ceil(d/C) chunks of C coordinates;
// round 1 all-reduces each chunk's squared L2 norm (FP16, 16/C bits per
// coordinate); every rank then picks the same J chunks with the largest summed
// norms; round 2 all-reduces those J·C values in FP16. b = 16(JC/d + 1/C).
// Error feedback on top (Factory default). It exploits spatial locality: on
// randomly permuted coordinates it does worse (paper Table 4).
//
// Our choices, where the paper is silent: a last partial chunk is zero-padded to
// C (so b counts ceil(d/C) norms and J·C values exactly); squared norms are
// divided by n before the cast and saturated at the wire type's largest finite
// value, so the FP16 sum cannot overflow to Inf; ties among chunk sums go to
// the lower chunk index, so all ranks agree. FP16 squared norms suit gradient
// magnitudes (a 64-chunk of values near 1e-3 has norm² 6e-5); for inputs whose
// squared chunk norms exceed 65504 or fall below ~1e-7, `norm_dtype: bf16`
// keeps the same 16 bits with float's range. The device-generic path
// (compress/CodecPath.h, TopKCGeneric.cpp) computes the same bits in ATen ops,
// the chunk norms summed in the order of the CPU kernel of the SIMD tier in use.
#pragma once

#include "compress/Compressor.h"
#include "util/Yaml.h"

namespace gradzip::compress {

struct TopKCOptions {
  int64_t chunk = 64;   // C; the paper uses 64 for b = 2 and 8, and 128 for b = 0.5
  double bits = 2.0;    // target b; J = floor((b d - normBits ceil(d/C)) / (valueBits C)), J in [1, ceil(d/C)]
  int64_t chunks = 0;   // J directly when > 0 (overrides bits; clamped to ceil(d/C))
  at::ScalarType values = at::kHalf;  // wire type of the chunk values (paper: fp16)
  at::ScalarType norms = at::kHalf;   // wire type of the squared chunk norms (paper: fp16)

  static TopKCOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& n) const;
  int64_t numChunks(int64_t d) const { return (d + chunk - 1) / chunk; }
  // J for a bucket of d coordinates.
  int64_t selected(int64_t d) const;
};

class TopKC final : public Compressor {
 public:
  explicit TopKC(TopKCOptions opts = {});
  std::string name() const override { return "topkc"; }
  Capabilities capabilities() const override;
  // (normBits ceil(d/C) + valueBits J C) / d; with FP16 and C | d this is the
  // paper's 16(JC/d + 1/C).
  double bitsPerCoordinate(int64_t d, int n) const override;
  // Paper §3.1.2 steps 1-2. mean is zero outside the chosen chunks;
  // localApplied = this rank's chosen-chunk values as they entered the sum, decoded.
  Aggregated aggregate(const at::Tensor& x, Context& ctx) override;
  // Payload {squared chunk norms [ceil(d/C)], chosen chunk values [J C]}; the
  // chunk choice is recomputed from the norms in decode(), as every rank does.
  Payload encode(const at::Tensor& x, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override;

  // The J chunk indices with the largest s (ties: lower index first), ascending;
  // s is float, half or bfloat16 (radix select on order-preserving keys; on
  // a non-CPU device, the same choice in ATen ops).
  static at::Tensor selectChunks(const at::Tensor& s, int64_t j);

  const TopKCOptions& options() const { return opts_; }

 private:
  // Squared chunk norms of x[0, d) / n in the norm wire type, saturated; one
  // pass that also rejects non-finite x (UserError).
  at::Tensor wireNorms(const float* x, int64_t d, int n, at::Tensor& cache);
  // chosen_ = the consensus chunks for the (all-reduced) norms `sums`.
  void choose(const at::Tensor& sums, int64_t d);
  // The chosen chunks of x / div in the value wire type, [J C], zero-padded.
  at::Tensor gatherChunks(const float* x, int64_t d, float div, at::Tensor& cache) const;
  // A d-vector, zero outside the chosen chunks, holding values·mul (half types)
  // or values/div (float).
  at::Tensor scatterChunks(const at::Tensor& values, int64_t d, float mul, float div, at::Tensor& cache) const;

  // The device-generic path (compress/CodecPath.h, TopKCGeneric.cpp): the same
  // bits as the kernels above, in ATen ops on x's device.
  Aggregated aggregateGeneric(const at::Tensor& x, Context& ctx);
  Payload encodeGeneric(const at::Tensor& x, Context& ctx);
  at::Tensor decodeGeneric(const Payload& p, int64_t d, Context& ctx);
  // wireNorms of x on x's device (x already checked finite).
  at::Tensor wireNormsGeneric(const at::Tensor& x, int n) const;
  // The consensus chunks (int64, ascending) for the norms `sums`, as choose().
  at::Tensor chooseGeneric(const at::Tensor& sums, int64_t d) const;
  // gatherChunks / scatterChunks for the chunks `chosen`.
  at::Tensor gatherChunksGeneric(const at::Tensor& x, const at::Tensor& chosen, float div) const;
  at::Tensor scatterChunksGeneric(const at::Tensor& values, const at::Tensor& chosen, int64_t d, float mul,
                                  float div) const;

  TopKCOptions opts_;
  int64_t agreedNumel_ = -1;  // d confirmed equal on every rank (checkSameNumelAcrossRanks)
  // Scratch reused across calls: squared norms, selection keys, chosen chunks,
  // and output buffers (simd::reusableBuffer: reused only when no caller holds them).
  std::vector<float> sq_;
  std::vector<uint32_t> keys_;
  std::vector<int64_t> chosen_;
  at::Tensor normCache_, valueCache_, meanCache_, appliedCache_;
};

}  // namespace gradzip::compress
