// Implements the schedule half of compress/GradiVeQ.h: warm-up, sampling with
// QSGD, basis computation on rank 0 with a broadcast, compressed iterations,
// the phase-dependent codec and checkpoints.
#include "compress/GradiVeQ.h"

#include "util/Error.h"
#include <spdlog/spdlog.h>

namespace gradzip::compress {

GradiVeQ::Phase GradiVeQ::phase() const {
  // No conv layer in the bucket: nothing to compress, plain all-reduce throughout.
  if (iteration_ < options_.warmup || (d_ >= 0 && layers_.empty())) return Phase::Warmup;
  const int64_t c = (iteration_ - options_.warmup) % (options_.samples + options_.compressed);
  if (c < options_.samples) return Phase::Sample;
  return haveBases() ? Phase::Compressed : Phase::Warmup;  // no conv layers: nothing to compress
}

double GradiVeQ::bitsPerCoordinate(int64_t d, int n) const {
  GZ_CHECK(d > 0, "gradiveq: bitsPerCoordinate needs d > 0");
  switch (phase()) {
    case Phase::Sample:
      if (qsgd_) return qsgd_->bitsPerCoordinate(d, n);
      return 32.0;
    case Phase::Compressed: {
      if (d != d_) return 32.0;
      int64_t values = plainIdx_.numel();
      for (const auto& L : layers_) values += L.slices * L.basis.size(1);
      return 32.0 * static_cast<double>(values) / static_cast<double>(d);
    }
    case Phase::Warmup:
      break;
  }
  return 32.0;
}

at::Tensor GradiVeQ::sumAcrossRanks(at::Tensor v, Context& ctx) const {
  if (ctx.comm.size() == 1) return v;
  return allReduceSum(v, ctx);  // linear: a plain float sum on the plan's collective
}

void GradiVeQ::recordSample(const at::Tensor& mean, int index) {
  for (auto& L : layers_) {
    auto P = mean.narrow(0, L.offset, L.numel).index_select(0, L.perm.narrow(0, 0, L.slices * L.K));
    L.samples[index].copy_(P.narrow(0, 0, L.K));
    L.sampleSum += P.to(at::kDouble);
  }
}

void GradiVeQ::computeBases(Context& ctx) {
  const int n = ctx.comm.size();
  std::vector<int64_t> dims(layers_.size(), 0);
  std::vector<at::Tensor> bases(layers_.size());
  if (ctx.comm.rank() == 0) {
    for (size_t i = 0; i < layers_.size(); ++i) {
      const auto& L = layers_[i];
      // PCA of the L_t first-slice samples: the right singular vectors of the
      // centred sample matrix are the covariance's eigenvectors, with
      // eigenvalues S²/(L_t − 1), in descending order.
      auto A = L.samples.to(at::kDouble);
      A = A - A.mean(0, true);
      auto [U, S, Vh] = at::linalg_svd(A, false);
      auto energy = S.pow(2);
      const double total = energy.sum().item<double>();
      int64_t d = 1;
      if (total > 0) {
        // eq. (6): the smallest d with Σ_{k<d} s[k] >= (1 − λ) Σ_k s[k].
        const at::Tensor cum = energy.cumsum(0).cpu();  // one copy of K values, read on the host
        const auto c = cum.accessor<double, 1>();
        const double need = (1 - options_.lambda) * total;
        d = 1;
        while (d < cum.numel() && c[d - 1] < need * (1 - 1e-12)) ++d;
      }
      bases[i] = Vh.narrow(0, 0, d).t().to(at::kFloat).contiguous();  // [K, d]
      dims[i] = d;
    }
  }
  // The collectives see tensors on the samples' device (the gradients').
  const auto on = layers_.empty() ? at::TensorOptions() : layers_[0].samples.options();
  auto dimT = at::tensor(dims, at::kLong).to(on.device());
  if (n > 1) ctx.comm.broadcast(dimT, 0).wait();
  dimT = dimT.cpu();
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto& L = layers_[i];
    const int64_t d = dimT[i].item<int64_t>();
    if (ctx.comm.rank() != 0) bases[i] = at::empty({L.K, d}, on.dtype(at::kFloat));
    if (n > 1) ctx.comm.broadcast(bases[i], 0).wait();  // every rank holds rank 0's U bit for bit
    L.basis = bases[i];
    // μ_m: the mean of the aggregated samples of slice m (identical on every
    // rank: the aggregated means are bit-identical).
    L.mu = (L.sampleSum / options_.samples).to(at::kFloat).view({L.slices, L.K}).contiguous();
    L.sampleSum.zero_();
    spdlog::debug("gradiveq: layer at {} K={} slices={} d={} (ratio {:.1f})", L.offset, L.K, L.slices, d,
                 static_cast<double>(L.K) / d);
  }
}

Aggregated GradiVeQ::aggregate(const at::Tensor& x, Context& ctx) {
  checkGradient(x, "gradiveq");
  GZ_CHECK(x.numel() > 0, "gradiveq: empty gradient");
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, "gradiveq");  // Gloo aborts on mismatched sizes
  plan(ctx.layout, x.numel(), x.device());
  const Phase ph = phase();
  const int n = ctx.comm.size();
  Aggregated r;
  const at::Tensor xc = x.contiguous();
  if (ph == Phase::Compressed) {
    at::Tensor c;
    {
      ScopedPhase t(ctx.times, &PhaseTimes::encode);
      c = compressVector(xc);
    }
    auto sum = sumAcrossRanks(c.clone(), ctx);
    ScopedPhase t(ctx.times, &PhaseTimes::decode);
    r.mean = decompressVector(sum / n);
    r.localApplied = decompressVector(c);
  } else if (ph == Phase::Sample && qsgd_) {
    Context sub = ctx;
    // QSGD is not summable: decompress-add-recompress ring (the paper's), or all-gather / ps.
    sub.collectiveName = options_.sampleCollective;
    r = qsgd_->aggregate(xc, sub);
  } else {
    r.mean = sumAcrossRanks(xc.clone(), ctx) / n;
    r.localApplied = xc;
  }
  if (ph == Phase::Sample) {
    const int64_t c = (iteration_ - options_.warmup) % (options_.samples + options_.compressed);
    recordSample(r.mean, static_cast<int>(c));
    if (c == options_.samples - 1) computeBases(ctx);
  }
  ++iteration_;
  r.mean = r.mean.to(x.device());
  r.localApplied = r.localApplied.to(x.device());
  return r;
}

Payload GradiVeQ::encode(const at::Tensor& x, Context& ctx) {
  checkGradient(x, "gradiveq");
  plan(ctx.layout, x.numel(), x.device());
  Payload p;
  const Phase ph = phase();
  if (ph == Phase::Sample && qsgd_) return qsgd_->encode(x, ctx);
  ScopedPhase t(ctx.times, &PhaseTimes::encode);
  p.tensors.push_back(ph == Phase::Compressed ? compressVector(x) : x.clone());
  return p;
}

at::Tensor GradiVeQ::decode(const Payload& p, int64_t d, Context& ctx) {
  const Phase ph = phase();
  if (ph == Phase::Sample && qsgd_) return qsgd_->decode(p, d, ctx);
  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  GZ_CHECK(p.tensors.size() == 1, "gradiveq: malformed payload");
  moveTo(p.tensors[0].device());
  return ph == Phase::Compressed ? decompressVector(p.tensors[0]) : p.tensors[0].clone();
}

void GradiVeQ::save(torch::serialize::OutputArchive& ar) const {
  ar.write("iteration", at::tensor({iteration_}, at::kLong));
  ar.write("d", at::tensor({d_}, at::kLong));
  ar.write("num_layers", at::tensor({static_cast<int64_t>(layers_.size())}, at::kLong));
  for (size_t i = 0; i < layers_.size(); ++i) {
    const auto& L = layers_[i];
    const std::string k = "layer" + std::to_string(i) + ".";
    ar.write(k + "offset", at::tensor({L.offset}, at::kLong));
    ar.write(k + "shape", at::tensor(L.shape, at::kLong));
    // Checkpoints hold CPU tensors; load() leaves them there until the next gradient's device.
    ar.write(k + "samples", L.samples.cpu());
    ar.write(k + "sample_sum", L.sampleSum.cpu());
    ar.write(k + "has_basis", at::tensor({static_cast<int64_t>(L.basis.defined())}, at::kLong));
    if (L.basis.defined()) {
      ar.write(k + "basis", L.basis.cpu());
      ar.write(k + "mu", L.mu.cpu());
    }
  }
}

void GradiVeQ::load(torch::serialize::InputArchive& ar) {
  at::Tensor t;
  ar.read("iteration", t);
  iteration_ = t.item<int64_t>();
  ar.read("d", t);
  const int64_t d = t.item<int64_t>();
  ar.read("num_layers", t);
  const int64_t num = t.item<int64_t>();
  // Rebuild the plan from the saved layout, then restore the learned state.
  std::vector<TensorSlot> layout;
  for (int64_t i = 0; i < num; ++i) {
    const std::string k = "layer" + std::to_string(i) + ".";
    TensorSlot s;
    s.name = k;
    ar.read(k + "offset", t);
    s.offset = t.item<int64_t>();
    ar.read(k + "shape", t);
    s.shape = std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
    s.numel = 1;
    for (auto v : s.shape) s.numel *= v;
    layout.push_back(s);
  }
  const int64_t it = iteration_;
  iteration_ = 0;
  d_ = -1;
  layers_.clear();
  if (d > 0) plan(layout, d, at::kCPU);
  iteration_ = it;
  for (int64_t i = 0; i < num; ++i) {
    auto& L = layers_[i];
    const std::string k = "layer" + std::to_string(i) + ".";
    ar.read(k + "samples", L.samples);
    ar.read(k + "sample_sum", L.sampleSum);
    ar.read(k + "has_basis", t);
    if (t.item<int64_t>()) {
      ar.read(k + "basis", L.basis);
      ar.read(k + "mu", L.mu);
    }
  }
  moveTo(at::kCPU);  // as saved; the next aggregate()/encode() moves it to its gradient's device
}

}  // namespace gradzip::compress
