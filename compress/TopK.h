// TopK: the realistic sparsification baseline of the end-to-end-utility paper
// §3.1.1 (following its refs [28, 48]): every rank sends the K largest-magnitude
// coordinates of its (error-fed) gradient as FP16 values plus int32 indices,
// the ranks all-gather both, and each rank sums the scattered contributions.
// b = 48K/d. Values beyond the wire type's range (|v| > 65504 in fp16) are
// sent saturated to its largest finite value, never as ±Inf; error feedback
// keeps the rest. Not all-reduce compatible (the index sets differ per rank), which
// is the paper's point; error feedback is applied (Factory default). The
// device-generic path (compress/CodecPath.h) selects the same indices in ATen
// ops (compress/kernels/TopKSelectGeneric.h); everything else is shared.
#pragma once

#include "compress/Compressor.h"
#include "util/Yaml.h"

namespace gradzip::compress {

struct TopKOptions {
  double ratio = 0.01;               // K = round(ratio * d), clamped to [1, d]
  double bits = 0;                   // > 0: K = floor(bits * d / (valueBits + 32)) instead of ratio
  at::ScalarType values = at::kHalf;  // wire type of the values (paper: fp16)

  static TopKOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& n) const;
  // K for a bucket of d coordinates.
  int64_t k(int64_t d) const;
};

class TopK final : public Compressor {
 public:
  explicit TopK(TopKOptions opts = {});
  std::string name() const override { return "topk"; }
  Capabilities capabilities() const override;
  // (valueBits + 32) K / d: K values and K int32 indices, no header.
  double bitsPerCoordinate(int64_t d, int n) const override;
  // mean = (1/n) Σ_r scatter(ix_r, v_r); localApplied = scatter(ix, v) of this rank.
  Aggregated aggregate(const at::Tensor& x, Context& ctx) override;
  // Payload {values [K], indices int32 [K]}.
  Payload encode(const at::Tensor& x, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override;

  const TopKOptions& options() const { return opts_; }

 private:
  TopKOptions opts_;
  int64_t agreedNumel_ = -1;  // d confirmed equal on every rank (checkSameNumelAcrossRanks)
};

}  // namespace gradzip::compress
