// Implements compress/TopKC.h: chunk-norm round, consensus chunk choice, FP16
// all-reduce of the chosen chunks.
#include "compress/TopKC.h"

#include "compress/FloatWire.h"
#include "compress/kernels/SimdKernels.h"
#include "compress/kernels/TopKSelectGeneric.h"
#include "util/Error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gradzip::compress {

TopKCOptions TopKCOptions::fromYaml(YamlReader& r) {
  TopKCOptions o;
  o.chunk = r.getInt("chunk", o.chunk, 1, int64_t{1} << 30);
  o.bits = r.getDouble("bits", o.bits, 0.0, 64.0);
  o.chunks = r.getInt("chunks", o.chunks, 0);
  o.values = readFloatWire(r, "value_dtype", o.values);
  o.norms = readFloatWire(r, "norm_dtype", o.norms);
  return o;
}

void TopKCOptions::toYaml(YAML::Node& n) const {
  n["chunk"] = chunk;
  n["bits"] = bits;
  n["chunks"] = chunks;
  n["value_dtype"] = floatWireName(values);
  n["norm_dtype"] = floatWireName(norms);
}

int64_t TopKCOptions::selected(int64_t d) const {
  const int64_t nc = numChunks(d);
  if (nc == 0) return 0;
  if (chunks > 0) return std::min(chunks, nc);
  // Paper §3.1.2: b = 16(JC/d + 1/C), solved for J with the wire types' widths.
  const double j = std::floor((bits * static_cast<double>(d) - floatWireBits(norms) * static_cast<double>(nc)) /
                              (floatWireBits(values) * static_cast<double>(chunk)));
  return std::clamp<int64_t>(static_cast<int64_t>(std::max(j, 0.0)), 1, nc);
}

TopKC::TopKC(TopKCOptions opts) : opts_(opts) {
  GZ_CHECK(opts_.chunk >= 1, "topkc: chunk must be >= 1, got {}", opts_.chunk);
  GZ_CHECK(opts_.bits > 0 || opts_.chunks > 0, "topkc: set bits > 0 or chunks > 0");
}

Capabilities TopKC::capabilities() const {
  Capabilities c;
  c.summable = true;
  c.unbiased = false;
  c.collectives = {"engine", "ring", "tree", "ps"};
  return c;
}

double TopKC::bitsPerCoordinate(int64_t d, int) const {
  if (d == 0) return 0.0;
  const int64_t bits = floatWireBits(opts_.norms) * opts_.numChunks(d) +
                       floatWireBits(opts_.values) * opts_.selected(d) * opts_.chunk;
  return static_cast<double>(bits) / static_cast<double>(d);
}

namespace {

// Order-preserving integer keys of IEEE floats (bigger float, bigger key), with
// -0 mapped onto +0 so that they tie as the float comparison does.
inline uint32_t orderKey32(uint32_t u) {
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
inline uint32_t orderKey16(uint16_t u) {
  if (u == 0x8000u) u = 0;
  return (u & 0x8000u) ? static_cast<uint16_t>(~u) : static_cast<uint16_t>(u | 0x8000u);
}

// Keys of a 1-D float, half or bfloat16 tensor; returns their width in bits.
int keysOf(const at::Tensor& s, std::vector<uint32_t>& keys) {
  const int64_t n = s.numel();
  keys.resize(static_cast<size_t>(n));
  if (s.scalar_type() == at::kFloat) {
    const auto* u = reinterpret_cast<const uint32_t*>(s.data_ptr<float>());
    for (int64_t i = 0; i < n; ++i) keys[i] = orderKey32(u[i]);
    return 32;
  }
  GZ_ASSERT(s.scalar_type() == at::kHalf || s.scalar_type() == at::kBFloat16, "topkc: unexpected norm type {}",
            c10::toString(s.scalar_type()));
  const auto* u = static_cast<const uint16_t*>(s.data_ptr());
  for (int64_t i = 0; i < n; ++i) keys[i] = orderKey16(u[i]);
  return 16;
}

// Indices (ascending) of the j largest keys, ties to the lower index: an MSD
// radix select of the j-th largest key T (8-bit digits, one scan each), then
// one scan taking every key above T and the first j − #above keys equal to T.
void selectTop(const std::vector<uint32_t>& keys, int width, int64_t j, std::vector<int64_t>& out) {
  const int64_t n = static_cast<int64_t>(keys.size());
  out.clear();
  out.reserve(static_cast<size_t>(j));
  if (j >= n) {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
    return;
  }
  uint32_t prefix = 0, mask = 0;
  int64_t rank = j, above = 0;
  for (int shift = width - 8; shift >= 0; shift -= 8) {
    uint32_t hist[256] = {};
    if (mask == 0) {  // first digit: every key counts
      for (int64_t i = 0; i < n; ++i) ++hist[(keys[i] >> shift) & 0xFF];
    } else {
      for (int64_t i = 0; i < n; ++i)
        if ((keys[i] & mask) == prefix) ++hist[(keys[i] >> shift) & 0xFF];
    }
    int b = 255;
    for (; b > 0 && hist[b] < rank; --b) {
      rank -= hist[b];
      above += hist[b];
    }
    prefix |= static_cast<uint32_t>(b) << shift;
    mask |= 0xFFu << shift;
  }
  int64_t equal = j - above;  // how many keys equal to T the choice takes
  for (int64_t i = 0; i < n; ++i) {
    if (keys[i] > prefix || (keys[i] == prefix && equal-- > 0)) out.push_back(i);
  }
  GZ_ASSERT(static_cast<int64_t>(out.size()) == j, "topkc: selection found {} chunks, expected {}", out.size(), j);
}

// Float values [len] -> wire type, dividing by div first (div == 1: none).
void toWire(const float* in, float div, at::ScalarType t, void* out, int64_t len) {
  switch (t) {
    case at::kHalf: simd::floatToHalf(in, div, static_cast<c10::Half*>(out), len); break;
    case at::kBFloat16: simd::floatToBf16(in, div, static_cast<c10::BFloat16*>(out), len); break;
    default: {
      float* o = static_cast<float*>(out);
      if (div == 1.0f)
        std::memcpy(o, in, static_cast<size_t>(len) * 4);
      else
        for (int64_t i = 0; i < len; ++i) o[i] = in[i] / div;
    }
  }
}

// Wire values [len] -> float: (v * mul) for half types, (v / div) for float.
void fromWire(const void* in, at::ScalarType t, float mul, float div, float* out, int64_t len) {
  switch (t) {
    case at::kHalf: simd::halfToFloat(static_cast<const c10::Half*>(in), mul, out, len); break;
    case at::kBFloat16: simd::bf16ToFloat(static_cast<const c10::BFloat16*>(in), mul, out, len); break;
    default: {
      const float* v = static_cast<const float*>(in);
      if (div == 1.0f)
        std::memcpy(out, v, static_cast<size_t>(len) * 4);
      else
        for (int64_t i = 0; i < len; ++i) out[i] = v[i] / div;
    }
  }
}

}  // namespace

at::Tensor TopKC::selectChunks(const at::Tensor& sIn, int64_t j) {
  const int64_t nc = sIn.numel();
  GZ_ASSERT(j >= 1 && j <= nc, "selectChunks: j = {} out of [1, {}]", j, nc);
  if (!sIn.is_cpu()) return largestKeys(orderKeys(sIn), j);  // the same choice in ATen ops, on s's device
  const at::Tensor s = sIn.cpu().contiguous();
  std::vector<uint32_t> keys;
  const int width = keysOf(s, keys);
  std::vector<int64_t> chosen;
  selectTop(keys, width, j, chosen);
  return at::tensor(chosen, at::kLong);
}

at::Tensor TopKC::wireNorms(const float* x, int64_t d, int n, at::Tensor& cache) {
  const int64_t nc = opts_.numChunks(d);
  sq_.resize(static_cast<size_t>(nc));
  requireFinite(simd::chunkSquaredNorms(x, d, opts_.chunk, sq_.data()), name());
  if (n > 1)
    for (auto& v : sq_) v /= static_cast<float>(n);  // keep the n-rank sum within range (as for fp16 values)
  if (opts_.norms != at::kFloat) {
    const float hi = opts_.norms == at::kHalf ? 65504.0f : 3.3895313892515355e38f;
    for (auto& v : sq_) v = std::min(v, hi);  // saturate rather than round to Inf
  }
  at::Tensor out = simd::reusableBuffer(cache, nc, opts_.norms);
  toWire(sq_.data(), 1.0f, opts_.norms, out.data_ptr(), nc);
  return out;
}

void TopKC::choose(const at::Tensor& sums, int64_t d) {
  const int width = keysOf(sums.contiguous(), keys_);
  selectTop(keys_, width, opts_.selected(d), chosen_);
}

at::Tensor TopKC::gatherChunks(const float* x, int64_t d, float div, at::Tensor& cache) const {
  const int64_t c = opts_.chunk;
  const int64_t j = static_cast<int64_t>(chosen_.size());
  at::Tensor out = simd::reusableBuffer(cache, j * c, opts_.values);
  auto* o = static_cast<char*>(out.data_ptr());
  const int64_t es = out.element_size();
  for (int64_t k = 0; k < j; ++k) {
    const int64_t start = chosen_[k] * c, len = std::min(c, d - start);
    toWire(x + start, div, opts_.values, o + k * c * es, len);
    if (len < c) std::memset(o + (k * c + len) * es, 0, static_cast<size_t>((c - len) * es));  // zero padding
  }
  return out;
}

at::Tensor TopKC::scatterChunks(const at::Tensor& values, int64_t d, float mul, float div, at::Tensor& cache) const {
  const int64_t c = opts_.chunk;
  at::Tensor out = simd::reusableBuffer(cache, d, at::kFloat);
  float* o = out.data_ptr<float>();
  const auto* v = static_cast<const char*>(values.data_ptr());
  const int64_t es = values.element_size();
  int64_t next = 0;  // first coordinate not yet written
  for (size_t k = 0; k < chosen_.size(); ++k) {
    const int64_t start = chosen_[k] * c, len = std::min(c, d - start);
    std::memset(o + next, 0, static_cast<size_t>(start - next) * 4);  // the unchosen chunks before this one
    fromWire(v + static_cast<int64_t>(k) * c * es, opts_.values, mul, div, o + start, len);
    next = start + len;
  }
  std::memset(o + next, 0, static_cast<size_t>(d - next) * 4);
  return out;
}

Payload TopKC::encode(const at::Tensor& xIn, Context& ctx) {
  if (!fastPath(xIn)) return encodeGeneric(xIn, ctx);
  checkGradientLayout(xIn, name());
  checkNonEmpty(xIn, name());
  ScopedPhase s(ctx.times, &PhaseTimes::encode);
  const at::Tensor x = xIn.cpu();
  const int64_t d = x.numel();
  Payload p;
  p.tensors.push_back(wireNorms(x.data_ptr<float>(), d, 1, normCache_));
  choose(p.tensors[0], d);
  p.tensors.push_back(gatherChunks(x.data_ptr<float>(), d, 1.0f, valueCache_));
  return p;
}

at::Tensor TopKC::decode(const Payload& p, int64_t d, Context& ctx) {
  const int64_t nc = opts_.numChunks(d), j = opts_.selected(d);
  GZ_CHECK(p.tensors.size() == 2 && p.tensors[0].numel() == nc && p.tensors[1].numel() == j * opts_.chunk &&
               p.tensors[0].scalar_type() == opts_.norms && p.tensors[1].scalar_type() == opts_.values,
           "topkc: payload does not hold {} chunk norms and {} values for d = {}", nc, j * opts_.chunk, d);
  if (!fastPath(p.tensors[1])) return decodeGeneric(p, d, ctx);
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  choose(p.tensors[0].cpu(), d);
  return scatterChunks(p.tensors[1].cpu().contiguous(), d, 1.0f, 1.0f, meanCache_);
}

Aggregated TopKC::aggregate(const at::Tensor& xIn, Context& ctx) {
  if (!fastPath(xIn)) return aggregateGeneric(xIn, ctx);
  checkGradientLayout(xIn, name());
  checkNonEmpty(xIn, name());
  confirmNumelOnce(&agreedNumel_, xIn.numel(), ctx, name());  // Gloo aborts on mismatched sizes
  const at::Tensor x = xIn.cpu();
  const int n = ctx.comm.size();
  const int64_t d = x.numel();
  at::Tensor norms;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    norms = wireNorms(x.data_ptr<float>(), d, n, normCache_);  // throws on NaN/Inf before anything is sent
  }
  // Round 1 (step 1): s_p = Σ_i ||c_p^(i)||² / n, all-reduced in the norm wire type.
  const at::Tensor sums = allReduceSum(norms, ctx);
  at::Tensor wire;
  const bool half = opts_.values != at::kFloat;
  {
    ScopedPhase s(ctx.times, &PhaseTimes::encode);
    // Step 2: the consensus top-J chunks; identical sums give identical choices.
    choose(sums, d);
    // Half types: divide by n before the cast so the sum cannot overflow.
    wire = gatherChunks(x.data_ptr<float>(), d, half ? static_cast<float>(n) : 1.0f, valueCache_);
  }
  const at::Tensor sum = allReduceSum(wire, ctx).contiguous();
  ScopedPhase s(ctx.times, &PhaseTimes::decode);
  Aggregated out;
  if (!half) {
    out.mean = scatterChunks(sum, d, 1.0f, static_cast<float>(n), meanCache_);  // sum first, then divide
    out.localApplied = scatterChunks(wire, d, 1.0f, 1.0f, appliedCache_);
  } else {
    out.mean = scatterChunks(sum, d, 1.0f, 1.0f, meanCache_);
    out.localApplied = scatterChunks(wire, d, static_cast<float>(n), 1.0f, appliedCache_);
  }
  out.mean = out.mean.to(xIn.device());
  out.localApplied = out.localApplied.to(xIn.device());
  return out;
}

}  // namespace gradzip::compress
