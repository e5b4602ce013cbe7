// Implements compress/ArTopK.h (flexible-communication paper Alg. 1).
#include "compress/ArTopK.h"

#include "compress/FloatWire.h"
#include "compress/kernels/TopKSelect.h"
#include "compress/kernels/TopKSelectGeneric.h"
#include "util/Error.h"

#include <algorithm>
#include <cmath>

namespace gradzip::compress {

ArTopKOptions ArTopKOptions::fromYaml(YamlReader& r) {
  ArTopKOptions o;
  o.cr = r.getDouble("cr", o.cr, 1e-9, 1.0);
  o.mode = r.getEnum("mode", o.mode, {"star", "var"});
  o.fused = r.getBool("fused", o.fused);
  return o;
}

void ArTopKOptions::toYaml(YAML::Node& n) const {
  n["cr"] = cr;
  n["mode"] = mode;
  n["fused"] = fused;
}

int64_t ArTopKOptions::k(int64_t d) const {
  if (d <= 0) return 0;
  return std::clamp<int64_t>(static_cast<int64_t>(std::round(cr * static_cast<double>(d))), 1, d);
}

ArTopK::ArTopK(ArTopKOptions opts) : opts_(std::move(opts)) {
  GZ_CHECK(opts_.cr > 0 && opts_.cr <= 1, "artopk: cr must be in (0, 1], got {}", opts_.cr);
  GZ_CHECK(opts_.mode == "star" || opts_.mode == "var", "artopk: mode must be star or var, got '{}'", opts_.mode);
}

Capabilities ArTopK::capabilities() const {
  Capabilities c;
  c.summable = true;  // the values all-reduce once the indices agree
  c.unbiased = false;
  c.collectives = {"ring", "tree", "engine", "ps"};
  c.wholeModel = opts_.fused;
  return c;
}

double ArTopK::bitsPerCoordinate(int64_t d, int) const {
  if (d == 0) return 0.0;
  const int64_t bits = 64 * opts_.k(d) + (opts_.mode == "var" ? 32 : 0);
  return static_cast<double>(bits) / static_cast<double>(d);
}

int ArTopK::pickSource(const std::vector<float>& energies) {
  int best = 0;
  for (int r = 1; r < static_cast<int>(energies.size()); ++r)
    if (energies[r] > energies[best]) best = r;
  return best;
}

Payload ArTopK::encode(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  checkNonEmpty(x, name());
  ScopedPhase s(ctx.times, &PhaseTimes::encode);
  // int32, ascending; the generic path selects the same indices in ATen ops.
  const int64_t k = opts_.k(x.numel());
  at::Tensor ix = fastPath(x) ? largestMagnitudes(x, k) : largestMagnitudesGeneric(x, k);
  Payload p;
  p.tensors.push_back(x.index_select(0, ix));
  p.tensors.push_back(ix);
  if (opts_.mode == "var") p.tensors.push_back(p.tensors[0].square().sum().reshape({1}));
  return p;
}

at::Tensor ArTopK::decode(const Payload& p, int64_t d, Context& ctx) {
  const int64_t k = opts_.k(d);
  const size_t parts = opts_.mode == "var" ? 3 : 2;
  GZ_CHECK(p.tensors.size() == parts && p.tensors[0].numel() == k && p.tensors[1].numel() == k &&
               p.tensors[1].scalar_type() == at::kInt,
           "artopk: payload does not hold {} values and {} int32 indices for d = {}", k, k, d);
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  return at::zeros({d}, p.tensors[0].options()).index_put_({p.tensors[1].to(at::kLong)}, p.tensors[0]);
}

Aggregated ArTopK::aggregate(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name());
  checkNonEmpty(x, name());
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, name());  // Gloo aborts on mismatched sizes
  const int n = ctx.comm.size();
  const int64_t d = x.numel(), k = opts_.k(d);
  // Alg. 1 line 6: g, ix = TopK(G, c).
  Payload local = encode(x, ctx);
  at::Tensor indices = local.tensors[1];
  int src = 0;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::communicate);
    if (opts_.mode == "star") {
      src = static_cast<int>(ctx.step % n);  // line 8: round robin, no communication
    } else {
      // Lines 11-14: all-gather ||g_r||², the source is the argmax.
      std::vector<at::Tensor> energies(n);
      for (auto& e : energies) e = at::empty({1}, x.options());
      ctx.comm.allGather(energies, local.tensors[2]).wait();
      std::vector<float> ev;
      for (const auto& e : energies) ev.push_back(e.item<float>());  // n scalars, one per rank
      src = pickSource(ev);
      if (ctx.times) ctx.times->bytesSent += 4;
    }
    // Line 16: ix~ = Broadcast(ix, src).
    if (ctx.comm.rank() != src) indices = at::empty({k}, x.options().dtype(at::kInt));
    ctx.comm.broadcast(indices, src).wait();
    if (ctx.times && ctx.comm.rank() == src) ctx.times->bytesSent += 4 * k;
  }
  at::Tensor ix, g;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    ix = indices.to(at::kLong);
    g = x.index_select(0, ix);  // line 17: g~ = G[ix~]
  }
  const at::Tensor sum = allReduceSum(g, ctx);  // line 19, with the plan's ring or tree
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  Aggregated out;
  out.mean = at::zeros({d}, x.options()).index_put_({ix}, sum.div(n));
  out.localApplied = at::zeros({d}, x.options()).index_put_({ix}, g);  // line 18: residual = G - scatter(g~)
  return out;
}

}  // namespace gradzip::compress
