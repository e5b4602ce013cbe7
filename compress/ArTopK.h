// AR-TopK (flexible-communication paper §3-C, Alg. 1): TopK made all-reduce
// compatible by agreeing on one rank's indices. Each rank takes the top k of its
// fused, error-fed gradient G; one source rank is chosen, by round robin
// (STAR-TopK: src = step % N, no communication) or by the largest local top-k
// energy (VAR-TopK: all-gather of N floats ||g_r||², src = argmax); the source
// broadcasts its int32 indices ix~; every rank all-reduces G[ix~] with the
// plan's collective (ring or tree; the engine's otherwise) and divides by N.
// The residual keeps G everywhere except ix~ (Alg. 1 line 18), which
// ErrorFeedback obtains from localApplied = scatter(ix~, G[ix~]). The
// device-generic path (compress/CodecPath.h) selects the same top k in ATen
// ops (compress/kernels/TopKSelectGeneric.h); everything else is shared.
#pragma once

#include "compress/Compressor.h"
#include "util/Yaml.h"

namespace gradzip::compress {

struct ArTopKOptions {
  double cr = 0.01;          // compression ratio c: k = round(c d), clamped to [1, d]
  std::string mode = "star";  // "star" (round robin) or "var" (largest ||g_r||²)
  // Alg. 1 runs on the fused whole-model gradient (Capabilities::wholeModel):
  // a static AR-TopK plan puts the model in one bucket whatever
  // comm.bucket_mb says (sync/GradSync.h bucketBytesFor).
  // false: one AR-TopK per bucket (an ablation). Under compress: auto the
  // buckets are the run's, and AR-TopK candidates run per bucket.
  bool fused = true;

  static ArTopKOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& n) const;
  int64_t k(int64_t d) const;
};

class ArTopK final : public Compressor {
 public:
  explicit ArTopK(ArTopKOptions opts = {});
  std::string name() const override { return "artopk"; }
  Capabilities capabilities() const override;
  // (32 k values + 32 k broadcast indices [+ 32 for VAR's norm]) / d. The index
  // message is the source rank's; it is counted for every rank because over
  // rounds each rank is the source equally often (STAR) and, in a tree
  // broadcast, inner ranks forward it.
  double bitsPerCoordinate(int64_t d, int n) const override;
  // Alg. 1 lines 6-19; mean = scatter(ix~, AllReduce(G[ix~]) / N).
  Aggregated aggregate(const at::Tensor& x, Context& ctx) override;
  // Single worker (src = this rank): {values fp32 [k], indices int32 [k] [, ||g||² fp32 [1] for VAR]}.
  Payload encode(const at::Tensor& x, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override;

  // The VAR-TopK source: argmax of energies, the lowest rank on ties.
  static int pickSource(const std::vector<float>& energies);

 private:
  ArTopKOptions opts_;
  int64_t agreedNumel_ = -1;  // d confirmed equal on every rank (checkSameNumelAcrossRanks)
};

}  // namespace gradzip::compress
