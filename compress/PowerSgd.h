// PowerSGD (Vogels, Karimireddy & Jaggi, NeurIPS 2019, Alg. 1): rank-r
// low-rank compression by one step of subspace (power) iteration per training
// step, warm-started from the previous step's Q. Each parameter matrix M
// (conv weights reshaped to [out, in·kh·kw]) is sent as P = M Q and Q = Mᵀ P̂,
// with an orthogonalisation of the all-reduced P in between:
//   P ← M Q;  P ← AllReduceMean(P);  P̂ ← orthogonalise(P);
//   Q ← Mᵀ P̂;  Q ← AllReduceMean(Q);  decompressed = P̂ Qᵀ.
// Tensors of dim <= 1 (biases, norms) and matrices too small to gain
// (r(R + C) >= R C, the rule of PyTorch's DDP PowerSGD hook) go uncompressed
// in the first all-reduce. All P's travel in one all-reduce and all Q's in a
// second (matrices of one shape are batched through bmm). Error feedback
// (Factory default) keeps M - P̂ Qᵀ: localApplied is P̂ Qᵀ, the mean itself, as
// in Alg. 2 of the paper. Q starts from the shared seed, so ranks agree, and
// is checkpointed. The end-to-end-utility paper §3.3 evaluates r = 1..64.
// With an empty layout the bucket is viewed as one [R, d/R] matrix, R the
// largest divisor of d not above sqrt(d) (our choice, for flat buckets).
// Written in ATen ops only, the one implementation on every device (there is
// no CPU kernel): the state lives on the gradients' device, Q_0 is drawn on
// the CPU and moved there, checkpoints hold CPU tensors.
#pragma once

#include "compress/Compressor.h"
#include "util/Yaml.h"

namespace gradzip::compress {

struct PowerSgdOptions {
  int64_t rank = 4;         // r
  bool warmStart = true;    // reuse Q across steps (paper §3: "warm start")
  double epsilon = 1e-8;    // added to column norms in Gram-Schmidt (the paper's code)

  static PowerSgdOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& n) const;
};

class PowerSgd final : public Compressor {
 public:
  explicit PowerSgd(PowerSgdOptions opts = {});
  ~PowerSgd() override;
  std::string name() const override { return "powersgd"; }
  Capabilities capabilities() const override;
  // 32 (uncompressed + Σ r(R + C)) / d for the layout of the last
  // aggregate()/encode() call when it covers d coordinates, else for the flat
  // [R, d/R] view.
  double bitsPerCoordinate(int64_t d, int n) const override;
  Aggregated aggregate(const at::Tensor& x, Context& ctx) override;
  // {[uncompressed | P of every matrix], [Q of every matrix]}, fp32; updates Q
  // like aggregate() (warm start).
  Payload encode(const at::Tensor& x, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override;
  // Q of every shape group and the plan's signature.
  void save(torch::serialize::OutputArchive& ar) const override;
  void load(torch::serialize::InputArchive& ar) override;

  // Batched Gram-Schmidt on the columns of p [B, R, r], in place (the
  // PowerSGD reference code: col /= ||col|| + eps; later cols -= (col·c) col).
  static void orthogonalize(at::Tensor& p, double epsilon);

  struct Plan;

 private:
  // The plan for d coordinates of ctx.layout, its Q on `device` (a loaded Q
  // is adopted there).
  Plan& planFor(int64_t d, const Context& ctx, const at::Device& device);
  // Runs Alg. 1 on x. `reduce` turns a local buffer into the mean over ranks
  // (all-reduce / n, or the identity for the single-worker codec).
  at::Tensor run(const at::Tensor& x, Context& ctx, const std::function<at::Tensor(const at::Tensor&)>& reduce);

  PowerSgdOptions opts_;
  int64_t agreedNumel_ = -1;  // d confirmed equal on every rank (checkSameNumelAcrossRanks)
  std::unique_ptr<Plan> plan_;
  std::vector<at::Tensor> loadedQ_;  // from load(), adopted when the plan's signature matches
  at::Tensor loadedSignature_;
};

}  // namespace gradzip::compress
