// Implements the layout planning and the linear codec of compress/GradiVeQ.h:
// conv flattening, slicing, compression Uᵀ(x − μ) and decompression U·g' + μ.
// The schedule, bases and checkpoints are in GradiVeQSchedule.cpp.
#include "compress/GradiVeQ.h"

#include "util/Error.h"

#include <algorithm>

namespace gradzip::compress {

GradiVeQOptions GradiVeQOptions::fromYaml(YamlReader& r) {
  GradiVeQOptions o;
  o.lambda = r.getDouble("lambda", o.lambda, 0.0, 0.999999);
  o.sliceMultiple = static_cast<int>(r.getInt("slice_multiple", o.sliceMultiple, 1, 1 << 20));
  o.maxSlice = r.getInt("max_slice", o.maxSlice, 1, 1 << 16);
  o.warmup = r.getInt("warmup", o.warmup, 0);
  o.samples = static_cast<int>(r.getInt("samples", o.samples, 2, 100000));
  o.compressed = static_cast<int>(r.getInt("compressed", o.compressed, 1, 100000000));
  o.sampleLevels = static_cast<int>(r.getInt("sample_levels", o.sampleLevels, 0, 1 << 20));
  o.sampleCollective = r.getEnum("sample_collective", o.sampleCollective, {"ring", "allgather", "ps"});
  r.finish();
  return o;
}

void GradiVeQOptions::toYaml(YAML::Node& node) const {
  node["lambda"] = lambda;
  node["slice_multiple"] = sliceMultiple;
  node["max_slice"] = maxSlice;
  node["warmup"] = warmup;
  node["samples"] = samples;
  node["compressed"] = compressed;
  node["sample_levels"] = sampleLevels;
  node["sample_collective"] = sampleCollective;
}

GradiVeQ::GradiVeQ(GradiVeQOptions options) : options_(std::move(options)) {
  GZ_CHECK(options_.lambda >= 0 && options_.lambda < 1, "gradiveq: lambda must be in [0, 1), got {}", options_.lambda);
  GZ_CHECK(options_.samples >= 2, "gradiveq: need at least 2 samples per cycle, got {}", options_.samples);
  GZ_CHECK(options_.compressed >= 1 && options_.warmup >= 0 && options_.sliceMultiple >= 1 && options_.maxSlice >= 1,
           "gradiveq: bad schedule or slice options");
  if (options_.sampleLevels > 0) {
    QsgdOptions q;
    q.levels = options_.sampleLevels;
    q.deployment = options_.sampleCollective;
    qsgd_ = std::make_unique<Qsgd>(q);
  }
}

Capabilities GradiVeQ::capabilities() const {
  Capabilities c;
  c.summable = true;  // linear: compressed vectors add (eq. (4))
  c.needsSharedSeed = false;
  c.unbiased = false;
  c.collectives = {"ring", "tree", "ps", "engine"};
  return c;
}

void GradiVeQ::setCodecPath(CodecPath p) {
  Compressor::setCodecPath(p);
  if (qsgd_) qsgd_->setCodecPath(p);
}

void GradiVeQ::moveTo(const at::Device& device) {
  auto move = [&device](at::Tensor& t) {
    if (t.defined() && t.device() != device) t = t.to(device);
  };
  for (auto& L : layers_) {
    move(L.perm);
    move(L.samples);
    move(L.sampleSum);
    move(L.mu);
    move(L.basis);
  }
  move(plainIdx_);
}

void GradiVeQ::plan(const std::vector<TensorSlot>& layout, int64_t d, const at::Device& device) {
  // Keep the state when the layout is the one already planned.
  std::vector<const TensorSlot*> convs;
  for (const auto& s : layout) {
    GZ_CHECK(s.offset >= 0 && s.numel >= 0 && s.offset + s.numel <= d,
             "gradiveq: layout slot '{}' [{}, {}) exceeds the bucket of {} coordinates", s.name, s.offset,
             s.offset + s.numel, d);
    if (s.shape.size() == 4 && s.numel > 0) convs.push_back(&s);
  }
  bool same = d == d_ && convs.size() == layers_.size();
  for (size_t i = 0; same && i < convs.size(); ++i)
    same = layers_[i].offset == convs[i]->offset && layers_[i].shape == convs[i]->shape;
  if (same) {
    moveTo(device);
    return;
  }
  GZ_CHECK(d_ < 0 || iteration_ == 0 || layers_.empty(),
           "gradiveq: the bucket layout changed after training started (the bases belong to the old layout)");

  layers_.clear();
  const auto on = at::TensorOptions().device(device);
  auto covered = at::zeros({d}, on.dtype(at::kBool));
  for (const auto* s : convs) {
    Layer L;
    L.offset = s->offset;
    L.numel = s->numel;
    L.shape = s->shape;
    const int64_t F = s->shape[0], D = s->shape[1];
    GZ_CHECK(F * D * s->shape[2] * s->shape[3] == s->numel, "gradiveq: slot '{}' numel does not match its shape",
             s->name);
    // §4 "Slice size K": K is a multiple of F·D, the granularity at which the
    // first slice's compressor fits the others (Fig. 5: the loss drops only at
    // multiples of F·D = 256 for a (3, 3, 16, 16) layer); higher multiples
    // capture more correlation at more SVD cost. So max_slice (ours) caps the
    // multiple, never the granularity: m = min(slice_multiple, floor(max_slice
    // / F·D)) but at least 1, i.e. K = F·D itself when F·D alone exceeds the
    // cap. (A 3x3 conv with F·D = 4096, as ResNet-32's 64-filter layers, gets
    // K = 4096; a K of 1024 would start successive slices at different depth
    // channels of a kernel position, out of step with the first slice.)
    const int64_t fd = F * D;
    const int64_t m = std::clamp<int64_t>(options_.maxSlice / fd, 1, options_.sliceMultiple);
    L.K = std::min(m * fd, s->numel);  // numel = F·D·kh·kw: still a multiple of F·D
    L.slices = s->numel / L.K;
    // Co-located flattening: permuted position k holds flat element perm[k].
    L.perm = at::arange(s->numel, on.dtype(at::kLong)).view(s->shape).permute({2, 3, 1, 0}).reshape({-1}).contiguous();
    L.samples = at::zeros({options_.samples, L.K}, on.dtype(at::kFloat));
    L.sampleSum = at::zeros({L.slices * L.K}, on.dtype(at::kDouble));
    covered.index_fill_(0, L.perm.narrow(0, 0, L.slices * L.K) + L.offset, true);
    layers_.push_back(std::move(L));
  }
  plainIdx_ = at::nonzero(covered.logical_not()).view({-1}).contiguous();
  d_ = d;
}

bool GradiVeQ::haveBases() const {
  if (layers_.empty()) return false;
  for (const auto& L : layers_)
    if (!L.basis.defined()) return false;
  return true;
}

at::Tensor GradiVeQ::compressVector(const at::Tensor& xIn) const {
  GZ_CHECK(haveBases() && xIn.numel() == d_, "gradiveq: no bases for a bucket of {} coordinates", xIn.numel());
  // The state is on x's device after aggregate()/encode(); .to() is a no-op then.
  const at::Tensor x = xIn.contiguous();
  const at::Device dev = x.device();
  std::vector<at::Tensor> parts;
  for (const auto& L : layers_) {
    auto P = x.narrow(0, L.offset, L.numel).index_select(0, L.perm.narrow(0, 0, L.slices * L.K).to(dev));
    // eq. (3): g'_m = Uᵀ(g_m − μ_m), all slices at once: [slices, K] x [K, d].
    parts.push_back(at::matmul(P.view({L.slices, L.K}) - L.mu.to(dev), L.basis.to(dev)).reshape({-1}));
  }
  parts.push_back(x.index_select(0, plainIdx_.to(dev)));
  return at::cat(parts);
}

at::Tensor GradiVeQ::decompressVector(const at::Tensor& cIn) const {
  GZ_CHECK(haveBases(), "gradiveq: no bases");
  const at::Tensor c = cIn.contiguous();
  const at::Device dev = c.device();
  auto out = at::empty({d_}, c.options());
  int64_t pos = 0;
  for (const auto& L : layers_) {
    const int64_t dim = L.basis.size(1);
    auto coef = c.narrow(0, pos, L.slices * dim).view({L.slices, dim});
    pos += L.slices * dim;
    // eq. (5): ĝ_m = U·g'_m + μ_m.
    auto slices = at::matmul(coef, L.basis.to(dev).t()) + L.mu.to(dev);
    out.index_put_({L.perm.narrow(0, 0, L.slices * L.K).to(dev) + L.offset}, slices.reshape({-1}));
  }
  GZ_CHECK(c.numel() == pos + plainIdx_.numel(), "gradiveq: compressed vector has {} values, expected {}", c.numel(),
           pos + plainIdx_.numel());
  out.index_put_({plainIdx_.to(dev)}, c.narrow(0, pos, plainIdx_.numel()));
  return out;
}

}  // namespace gradzip::compress
