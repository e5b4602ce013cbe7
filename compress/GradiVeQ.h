// GradiVeQ (gradiveq-pca-vector-quantization paper): PCA vector quantisation of
// convolutional gradients, linear so that compressed vectors add up in a ring
// all-reduce.
//
// Per conv weight [F, D, kh, kw] (found in Context::layout as a 4-D shape) the
// gradient is flattened so co-located filter values sit together
// (permute {2,3,1,0}: F fastest, then depth, width, height; §3, Fig. 3) and cut
// into slices of K = m·F·D, always a multiple of F·D (§4): m = slice_multiple,
// lowered to fit max_slice but never below 1, and K at most the layer (the
// paper's K = 768 for 3x3x16x16). One basis per layer from its first
// slice (reuse factor s = ∞, §4), per-slice whitening means μ_m. Node n sends
// g'_n = Uᵀ(x_n − μ) for every full slice (our gradients are means, so μ is the
// sample mean of the aggregated *mean* and the paper's μ/N becomes μ after the
// 1/N of the mean: Σ_n Uᵀ(x_n − μ)/N = Uᵀ(x̄ − μ), eq. (4)); the mean is
// U·g' + μ (eq. (5)). Everything else (non-conv parameters, the remainder of a
// layer that is not a whole slice) travels uncompressed in the same float
// all-reduce (floatSum: any ring/tree/ps collective or the engine).
//
// Schedule (§4): `warmup` uncompressed iterations, then cycles of L_t sampling
// iterations and L_c compressed ones. Sampling iterations aggregate with 4-bit
// QSGD (levels s = 7) in a ring all-reduce that decompresses, adds and
// recompresses at every hop, as the paper's "4-bit-QSGD RAR" (§1, §4;
// `sample_collective` also offers allgather and ps), and record the aggregated mean as a
// sample; after the L_t-th, rank 0 computes each layer's basis (SVD of the
// centred samples = eigendecomposition of their covariance; d = the smallest
// with captured energy >= 1 − λ, eq. (6)) and broadcasts it, so every rank holds
// the identical U. Bases, means, samples and the schedule position are
// checkpointed. Deterministic and biased; no error feedback (as the paper).
// Written in ATen ops only, the one implementation on every device (the
// sampling QSGD has its own paths, and follows this compressor's codec path):
// the state lives on the gradients' device, checkpoints hold CPU tensors.
#pragma once

#include "compress/Compressor.h"
#include "compress/Qsgd.h"
#include "util/Yaml.h"

#include <memory>
#include <string>
#include <vector>

namespace gradzip::compress {

struct GradiVeQOptions {
  double lambda = 0.01;      // λ: compression loss allowed on the samples
  int sliceMultiple = 3;     // K = sliceMultiple·F·D at most
  // Cap on K (our choice: the SVD and U cost grow with K), applied to the
  // multiple, so K stays a multiple of F·D (§4): the largest multiple of F·D
  // that is <= max_slice and <= slice_multiple·F·D, or F·D itself when
  // F·D > max_slice (then K exceeds the cap).
  int64_t maxSlice = 1024;
  int64_t warmup = 2500;     // uncompressed iterations before the first cycle
  int samples = 100;         // L_t
  int compressed = 400;      // L_c
  int sampleLevels = 7;      // QSGD s of the sampling iterations (7 = 4 bits); 0 = uncompressed
  // How the QSGD samples are aggregated: "ring" (the paper's 4-bit-QSGD RAR,
  // decompress-add-recompress at every hop), "allgather" or "ps" (Dithering.h).
  std::string sampleCollective = "ring";

  static GradiVeQOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& node) const;
};

class GradiVeQ : public Compressor {
 public:
  enum class Phase { Warmup, Sample, Compressed };

  explicit GradiVeQ(GradiVeQOptions options);

  std::string name() const override { return "gradiveq"; }
  Capabilities capabilities() const override;
  // Bits of the phase the next aggregate() runs in (32 while warming up or when
  // no basis exists; QSGD's during sampling; the coefficients otherwise), for
  // the layout last seen.
  double bitsPerCoordinate(int64_t d, int n) const override;
  Aggregated aggregate(const at::Tensor& x, Context& ctx) override;
  Payload encode(const at::Tensor& x, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override;
  void save(torch::serialize::OutputArchive& ar) const override;
  void load(torch::serialize::InputArchive& ar) override;
  // Also sets the sampling QSGD's path.
  void setCodecPath(CodecPath p) override;

  Phase phase() const;
  int64_t iteration() const { return iteration_; }
  // The compressed-phase wire vector of x (coefficients, then uncompressed
  // coordinates) and its inverse; need bases (phase() == Compressed).
  at::Tensor compressVector(const at::Tensor& x) const;
  at::Tensor decompressVector(const at::Tensor& c) const;
  // Per conv layer (layout order): slice size K, basis U [K, d], means μ [slices, K],
  // and the recorded first-slice samples [L_t, K].
  int numLayers() const { return static_cast<int>(layers_.size()); }
  int64_t sliceSize(int layer) const { return layers_.at(layer).K; }
  const at::Tensor& basis(int layer) const { return layers_.at(layer).basis; }
  const at::Tensor& means(int layer) const { return layers_.at(layer).mu; }
  const at::Tensor& samples(int layer) const { return layers_.at(layer).samples; }

 private:
  struct Layer {
    int64_t offset = 0, numel = 0, K = 0, slices = 0;
    std::vector<int64_t> shape;
    at::Tensor perm;       // int64 [numel]: flat index (within the layer) of permuted position k
    at::Tensor samples;    // float [L_t, K]: first slice of each aggregated sample
    at::Tensor sampleSum;  // double [slices·K]: Σ of the aggregated samples (for μ)
    at::Tensor mu;         // float [slices, K]
    at::Tensor basis;      // float [K, d]
  };
  // Plans (or keeps) the layers for `layout`, its tensors on `device`.
  void plan(const std::vector<TensorSlot>& layout, int64_t d, const at::Device& device);
  // Moves every state tensor to `device` (after a checkpoint load, or a device change).
  void moveTo(const at::Device& device);
  at::Tensor sumAcrossRanks(at::Tensor v, Context& ctx) const;
  void recordSample(const at::Tensor& mean, int index);
  void computeBases(Context& ctx);
  bool haveBases() const;

  GradiVeQOptions options_;
  std::unique_ptr<Qsgd> qsgd_;
  int64_t iteration_ = 0;
  int64_t d_ = -1;
  std::vector<Layer> layers_;
  at::Tensor plainIdx_;  // int64: coordinates sent uncompressed
  int64_t agreedNumel_ = -1;  // d confirmed equal on every rank (checkSameNumelAcrossRanks)
};

}  // namespace gradzip::compress
