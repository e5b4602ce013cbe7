// Implements compress/PowerSgd.h: the shape plan (which coordinates form which
// matrices), batched power iteration with Gram-Schmidt, Q state.
#include "compress/PowerSgd.h"

#include "util/Error.h"
#include "util/Log.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace gradzip::compress {

// Which coordinates of the bucket are matrices (grouped by shape) and which go
// uncompressed; built once per layout.
struct PowerSgd::Plan {
  struct Group {
    int64_t rows = 0, cols = 0, rank = 0;
    std::vector<int64_t> offsets;  // one per matrix, into the bucket
    at::Tensor q;                  // [B, cols, rank], the warm-start state
  };
  int64_t d = 0;
  std::vector<TensorSlot> layout;
  std::vector<std::pair<int64_t, int64_t>> dense;  // (offset, numel) ranges sent uncompressed
  int64_t denseNumel = 0;
  std::vector<Group> groups;

  int64_t pNumel() const {
    int64_t s = 0;
    for (const auto& g : groups) s += static_cast<int64_t>(g.offsets.size()) * g.rows * g.rank;
    return s;
  }
  int64_t qNumel() const {
    int64_t s = 0;
    for (const auto& g : groups) s += static_cast<int64_t>(g.offsets.size()) * g.cols * g.rank;
    return s;
  }
  // int64 [G, 4]: (B, R, C, r) per group; identifies the shape of the Q state.
  at::Tensor signature() const {
    at::Tensor s = at::empty({static_cast<int64_t>(groups.size()), 4}, at::kLong);
    for (size_t i = 0; i < groups.size(); ++i) {
      const auto& g = groups[i];
      s[i][0] = static_cast<int64_t>(g.offsets.size());
      s[i][1] = g.rows;
      s[i][2] = g.cols;
      s[i][3] = g.rank;
    }
    return s;
  }
};

namespace {

bool sameLayout(const std::vector<TensorSlot>& a, const std::vector<TensorSlot>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].shape != b[i].shape || a[i].offset != b[i].offset || a[i].numel != b[i].numel) return false;
  return true;
}

std::unique_ptr<PowerSgd::Plan> buildPlan(int64_t d, const std::vector<TensorSlot>& layout, int64_t rank) {
  struct Matrix { int64_t offset, rows, cols; };
  std::vector<Matrix> candidates;
  if (layout.empty()) {
    int64_t rows = static_cast<int64_t>(std::sqrt(static_cast<double>(d)));
    while (rows > 1 && d % rows != 0) --rows;
    if (rows >= 2) candidates.push_back({0, rows, d / rows});
  } else {
    for (const auto& s : layout) {
      int64_t numel = 1;
      for (int64_t e : s.shape) numel *= e;
      GZ_CHECK(numel == s.numel && s.offset >= 0 && s.offset + s.numel <= d,
               "powersgd: layout slot '{}' (offset {}, numel {}, {} by shape) does not fit a bucket of {}", s.name,
               s.offset, s.numel, numel, d);
      // Conv weights [out, in, kh, kw] become [out, in*kh*kw] (PowerSGD §4).
      if (s.shape.size() >= 2 && numel > 0) candidates.push_back({s.offset, s.shape[0], numel / s.shape[0]});
    }
  }
  auto plan = std::make_unique<PowerSgd::Plan>();
  plan->d = d;
  plan->layout = layout;
  std::vector<Matrix> matrices;
  for (const auto& m : candidates) {
    const int64_t r = std::min({rank, m.rows, m.cols});
    if (r * (m.rows + m.cols) < m.rows * m.cols) matrices.push_back(m);  // else cheaper uncompressed
  }
  std::sort(matrices.begin(), matrices.end(), [](const Matrix& a, const Matrix& b) { return a.offset < b.offset; });
  std::map<std::tuple<int64_t, int64_t, int64_t>, size_t> groupOf;
  int64_t pos = 0;
  for (const auto& m : matrices) {
    GZ_CHECK(m.offset >= pos, "powersgd: layout slots overlap at offset {}", m.offset);
    if (m.offset > pos) plan->dense.emplace_back(pos, m.offset - pos);
    pos = m.offset + m.rows * m.cols;
    const int64_t r = std::min({rank, m.rows, m.cols});
    auto key = std::make_tuple(m.rows, m.cols, r);
    auto it = groupOf.find(key);
    if (it == groupOf.end()) {
      it = groupOf.emplace(key, plan->groups.size()).first;
      plan->groups.push_back({m.rows, m.cols, r, {}, {}});
    }
    plan->groups[it->second].offsets.push_back(m.offset);
  }
  if (pos < d) plan->dense.emplace_back(pos, d - pos);
  for (const auto& [o, n] : plan->dense) plan->denseNumel += n;
  return plan;
}

// Q_0 ~ N(0, 1) from the shared seed: every rank draws the same matrix. It is
// drawn on the CPU whatever the device, then moved there, so a GPU run starts
// from the bits a CPU run starts from.
void initQ(PowerSgd::Plan& plan, uint64_t seed, const at::Device& device) {
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    auto& g = plan.groups[i];
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 0x9e3779b97f4a7c15ULL * (i + 1));
    g.q = at::randn({static_cast<int64_t>(g.offsets.size()), g.cols, g.rank}, gen, at::kFloat).to(device);
  }
}

// The group's matrices stacked as [B, R, C] (a view when B = 1).
at::Tensor gather(const at::Tensor& x, const PowerSgd::Plan::Group& g) {
  if (g.offsets.size() == 1) return x.narrow(0, g.offsets[0], g.rows * g.cols).view({1, g.rows, g.cols});
  std::vector<at::Tensor> ms;
  for (int64_t off : g.offsets) ms.push_back(x.narrow(0, off, g.rows * g.cols).view({g.rows, g.cols}));
  return at::stack(ms);
}

// Writes P̂ Qᵀ of every group and the dense ranges of `dense` into a d-vector.
at::Tensor assemble(const PowerSgd::Plan& plan, const at::Tensor& dense, const std::vector<at::Tensor>& p,
                    const std::vector<at::Tensor>& q) {
  at::Tensor out = at::empty({plan.d}, dense.options());
  int64_t pos = 0;
  for (const auto& [o, n] : plan.dense) {
    out.narrow(0, o, n).copy_(dense.narrow(0, pos, n));
    pos += n;
  }
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const auto& g = plan.groups[i];
    const at::Tensor approx = at::bmm(p[i], q[i].transpose(1, 2));  // [B, R, C]
    for (size_t b = 0; b < g.offsets.size(); ++b)
      out.narrow(0, g.offsets[b], g.rows * g.cols).view({g.rows, g.cols}).copy_(approx[b]);
  }
  return out;
}

// Splits a flat buffer into one [B, rows-or-cols, r] tensor per group.
std::vector<at::Tensor> split(const PowerSgd::Plan& plan, const at::Tensor& buf, int64_t start, bool cols) {
  std::vector<at::Tensor> out;
  for (const auto& g : plan.groups) {
    const int64_t b = static_cast<int64_t>(g.offsets.size()), m = cols ? g.cols : g.rows;
    out.push_back(buf.narrow(0, start, b * m * g.rank).view({b, m, g.rank}));
    start += b * m * g.rank;
  }
  return out;
}

}  // namespace

PowerSgdOptions PowerSgdOptions::fromYaml(YamlReader& r) {
  PowerSgdOptions o;
  o.rank = r.getInt("rank", o.rank, 1, 1 << 16);
  o.warmStart = r.getBool("warm_start", o.warmStart);
  o.epsilon = r.getDouble("epsilon", o.epsilon, 0.0, 1.0);
  return o;
}

void PowerSgdOptions::toYaml(YAML::Node& n) const {
  n["rank"] = rank;
  n["warm_start"] = warmStart;
  n["epsilon"] = epsilon;
}

PowerSgd::PowerSgd(PowerSgdOptions opts) : opts_(opts) {
  GZ_CHECK(opts_.rank >= 1, "powersgd: rank must be >= 1, got {}", opts_.rank);
}

PowerSgd::~PowerSgd() = default;

Capabilities PowerSgd::capabilities() const {
  Capabilities c;
  c.summable = true;  // P and Q are plain sums
  c.unbiased = false;
  c.collectives = {"engine", "ring", "tree", "ps"};
  return c;
}

double PowerSgd::bitsPerCoordinate(int64_t d, int) const {
  if (d == 0) return 0.0;
  std::unique_ptr<Plan> flat;
  const Plan* p = plan_.get();
  if (!p || p->d != d) p = (flat = buildPlan(d, {}, opts_.rank)).get();
  return 32.0 * static_cast<double>(p->denseNumel + p->pNumel() + p->qNumel()) / static_cast<double>(d);
}

void PowerSgd::orthogonalize(at::Tensor& p, double epsilon) {
  const int64_t r = p.size(2);
  for (int64_t i = 0; i < r; ++i) {
    at::Tensor col = p.narrow(2, i, 1);  // [B, R, 1]
    col.div_(col.norm(2, {1}, /*keepdim=*/true).add_(epsilon));
    if (i + 1 < r) {
      at::Tensor rest = p.narrow(2, i + 1, r - i - 1);
      rest.sub_((col * rest).sum({1}, /*keepdim=*/true) * col);
    }
  }
}

PowerSgd::Plan& PowerSgd::planFor(int64_t d, const Context& ctx, const at::Device& device) {
  if (plan_ && plan_->d == d && sameLayout(plan_->layout, ctx.layout)) {
    // Q lives on the device of the gradients it multiplies (a no-op unless that changed).
    for (auto& g : plan_->groups)
      if (g.q.defined() && g.q.device() != device) g.q = g.q.to(device);
    return *plan_;
  }
  plan_ = buildPlan(d, ctx.layout, opts_.rank);
  if (loadedSignature_.defined()) {
    if (at::equal(loadedSignature_, plan_->signature())) {
      // A checkpoint holds Q on the CPU; it moves to the next gradient's device.
      for (size_t i = 0; i < plan_->groups.size(); ++i) plan_->groups[i].q = loadedQ_[i].to(device);
    } else {
      spdlog::warn("powersgd: checkpointed Q does not match the bucket's layout; starting from a fresh Q");
    }
    loadedSignature_ = at::Tensor();
    loadedQ_.clear();
  }
  return *plan_;
}

at::Tensor PowerSgd::run(const at::Tensor& x, Context& ctx,
                         const std::function<at::Tensor(const at::Tensor&)>& reduce) {
  Plan& plan = planFor(x.numel(), ctx, x.device());
  const bool fresh = plan.groups.empty() ? false : !plan.groups[0].q.defined();
  if (fresh || !opts_.warmStart) initQ(plan, ctx.sharedSeed(), x.device());
  std::vector<at::Tensor> ms;
  at::Tensor buf1 = at::empty({plan.denseNumel + plan.pNumel()}, x.options());
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    int64_t pos = 0;
    for (const auto& [o, n] : plan.dense) {
      buf1.narrow(0, pos, n).copy_(x.narrow(0, o, n));
      pos += n;
    }
    auto ps = split(plan, buf1, plan.denseNumel, false);
    for (size_t i = 0; i < plan.groups.size(); ++i) {
      ms.push_back(gather(x, plan.groups[i]));
      at::bmm_out(ps[i], ms[i], plan.groups[i].q);  // Alg. 1 line 2: P ← M Q
    }
  }
  const at::Tensor mean1 = reduce(buf1);  // line 3: P ← AllReduceMean(P), with the uncompressed tensors
  std::vector<at::Tensor> phat;
  at::Tensor buf2 = at::empty({plan.qNumel()}, x.options());
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    for (auto& p : split(plan, mean1, plan.denseNumel, false)) {
      phat.push_back(p.clone());
      orthogonalize(phat.back(), opts_.epsilon);  // line 4
    }
    auto qs = split(plan, buf2, 0, true);
    for (size_t i = 0; i < plan.groups.size(); ++i) at::bmm_out(qs[i], ms[i].transpose(1, 2), phat[i]);  // line 5
  }
  const at::Tensor mean2 = reduce(buf2);  // line 6: Q ← AllReduceMean(Q)
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  auto qs = split(plan, mean2, 0, true);
  for (size_t i = 0; i < plan.groups.size(); ++i) plan.groups[i].q = qs[i].clone();  // warm start
  return assemble(plan, mean1, phat, qs);
}

Aggregated PowerSgd::aggregate(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  GZ_CHECK(x.numel() > 0, "powersgd: empty gradient (a bucket needs at least one coordinate)");
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, name());  // Gloo aborts on mismatched sizes
  const int n = ctx.comm.size();
  Aggregated out;
  out.mean = run(x, ctx, [&](const at::Tensor& buf) { return allReduceSum(buf, ctx).div_(n); });
  // Error feedback keeps M - P̂ Qᵀ on matrices and nothing on exact tensors.
  out.localApplied = out.mean.clone();
  for (const auto& [o, len] : plan_->dense) out.localApplied.narrow(0, o, len).copy_(x.narrow(0, o, len));
  return out;
}

Payload PowerSgd::encode(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  GZ_CHECK(x.numel() > 0, "powersgd: empty gradient (a bucket needs at least one coordinate)");
  Payload p;
  run(x, ctx, [&](const at::Tensor& buf) {
    p.tensors.push_back(buf);
    return buf;
  });
  return p;
}

at::Tensor PowerSgd::decode(const Payload& p, int64_t d, Context& ctx) {
  GZ_CHECK(p.tensors.size() == 2 && p.tensors[0].defined(), "powersgd: malformed payload");
  Plan& plan = planFor(d, ctx, p.tensors[0].device());
  GZ_CHECK(p.tensors.size() == 2 && p.tensors[0].numel() == plan.denseNumel + plan.pNumel() &&
               p.tensors[1].numel() == plan.qNumel(),
           "powersgd: payload does not match the plan for d = {}", d);
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  std::vector<at::Tensor> phat;
  for (auto& t : split(plan, p.tensors[0], plan.denseNumel, false)) {
    phat.push_back(t.clone());
    orthogonalize(phat.back(), opts_.epsilon);
  }
  return assemble(plan, p.tensors[0], phat, split(plan, p.tensors[1], 0, true));
}

void PowerSgd::save(torch::serialize::OutputArchive& ar) const {
  at::Tensor sig = at::empty({0, 4}, at::kLong);
  std::vector<at::Tensor> qs;
  if (plan_ && (plan_->groups.empty() || plan_->groups[0].q.defined())) {
    sig = plan_->signature();
    for (const auto& g : plan_->groups) qs.push_back(g.q.cpu());  // checkpoints hold CPU tensors
  } else if (loadedSignature_.defined()) {
    sig = loadedSignature_;
    qs = loadedQ_;
  }
  ar.write("signature", sig);
  for (size_t i = 0; i < qs.size(); ++i) ar.write("q" + std::to_string(i), qs[i]);
}

void PowerSgd::load(torch::serialize::InputArchive& ar) {
  at::Tensor sig;
  ar.read("signature", sig);
  sig = sig.cpu();
  GZ_CHECK(sig.dim() == 2 && sig.size(1) == 4, "powersgd: checkpoint has a malformed Q signature");
  loadedQ_.clear();
  for (int64_t i = 0; i < sig.size(0); ++i) {
    at::Tensor q;
    ar.read("q" + std::to_string(i), q);
    GZ_CHECK(q.dim() == 3 && q.size(0) == sig[i][0].item<int64_t>() && q.size(1) == sig[i][2].item<int64_t>() &&
                 q.size(2) == sig[i][3].item<int64_t>(),
             "powersgd: checkpointed Q {} does not match its signature", i);
    loadedQ_.push_back(q.cpu().contiguous());  // moved to the gradients' device when adopted
  }
  loadedSignature_ = sig.size(0) > 0 ? sig : at::Tensor();
  plan_.reset();  // rebuilt (adopting the loaded Q) on the next call
}

}  // namespace gradzip::compress
