// Implements compress/NaturalCompression.h: the bit-level C_nat, its 8-bit wire
// code, and the parameter-server and all-gather aggregations (the loops over
// whole buffers are in compress/kernels/NaturalKernels.cpp).
#include "compress/NaturalCompression.h"

#include "compress/ShardedExchange.h"
#include "compress/kernels/CounterRng.h"
#include "compress/kernels/NaturalKernels.h"
#include "compress/kernels/SimdKernels.h"
#include "util/Error.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace gradzip::compress {
namespace {

constexpr int kCnatTag = 0x434E;  // psExchange uses this tag and the next

uint32_t bitsOf(float t) { return std::bit_cast<uint32_t>(t); }
float floatOf(uint32_t u) { return std::bit_cast<float>(u); }

}  // namespace

float naturalRound(float t, uint32_t r) {
  const uint32_t u = bitsOf(t);
  if (((u >> 23) & 0xFF) == 0xFF) return t;  // ±inf, NaN
  if ((u & 0x7FFFFFFF) == 0) return t;       // ±0
  const uint32_t v = (u + (r & 0x7FFFFF)) & 0xFF800000u;
  if (((v >> 23) & 0xFF) == 0xFF) return std::copysign(std::ldexp(1.0f, 127), t);  // exponent overflow
  return floatOf(v);
}

float naturalRoundNearest(float t) { return naturalRound(t, 0x400000u); }

uint8_t naturalEncode(float t, uint64_t rnd, bool stochastic, bool* clipped) {
  if (t == 0) return 0;
  const uint8_t sign = std::signbit(t) ? 0x80 : 0;
  const float a = std::fabs(t);
  const float lowest = std::ldexp(1.0f, kNatMinExp);
  if (a < lowest) {
    // Below the wire range: 2^−50 with probability |t|/2^−50, else 0 (unbiased);
    // the deterministic variant takes the nearer of the two.
    const float u = static_cast<float>(rnd & 0x7FFFFF) * (1.0f / 8388608.0f);
    const bool up = stochastic ? u * lowest < a : 2 * a >= lowest;
    return up ? static_cast<uint8_t>(sign | 0x40 | 0) : 0;
  }
  const float v = stochastic ? naturalRound(a, static_cast<uint32_t>(rnd) & 0x7FFFFF) : naturalRoundNearest(a);
  int e = std::ilogb(v);
  if (e > kNatMaxExp) {
    e = kNatMaxExp;
    if (clipped) *clipped = true;
  }
  return static_cast<uint8_t>(sign | 0x40 | (e - kNatMinExp));
}

float naturalDecode(uint8_t code) {
  if (!(code & 0x40)) return 0.0f;
  const float v = std::ldexp(1.0f, (code & 0x3F) + kNatMinExp);
  return (code & 0x80) ? -v : v;
}

int64_t naturalFixed(uint8_t code) {
  if (!(code & 0x40)) return 0;
  const int64_t v = int64_t{1} << (code & 0x3F);
  return (code & 0x80) ? -v : v;
}

NaturalCompressionOptions NaturalCompressionOptions::fromYaml(YamlReader& r) {
  NaturalCompressionOptions o;
  o.deterministic = r.getBool("deterministic", o.deterministic);
  o.deployment = r.getEnum("deployment", o.deployment, {"ps", "allgather"});
  r.finish();
  return o;
}

void NaturalCompressionOptions::toYaml(YAML::Node& node) const {
  node["deterministic"] = deterministic;
  node["deployment"] = deployment;
}

NaturalCompression::NaturalCompression(NaturalCompressionOptions options) : options_(std::move(options)) {
  GZ_CHECK(options_.deployment == "ps" || options_.deployment == "allgather",
           "cnat: deployment must be ps or allgather, got '{}'", options_.deployment);
}

Capabilities NaturalCompression::capabilities() const {
  Capabilities c;
  c.summable = false;  // powers of two do not add to powers of two
  c.needsSharedSeed = false;
  c.unbiased = !options_.deterministic;  // up to the 2^10 clip
  c.collectives = {"ps", "allgather"};
  return c;
}

double NaturalCompression::bitsPerCoordinate(int64_t d, int) const {
  GZ_CHECK(d > 0, "cnat: bitsPerCoordinate needs d > 0");
  return 8.0;
}

at::Tensor NaturalCompression::encodeCodes(const at::Tensor& x, uint64_t seed, int64_t* clipped) {
  auto xc = x.contiguous();  // on the CPU: the fast path's caller checked fastPath(x)
  const int64_t d = xc.numel();
  auto codes = simd::reusableBuffer(codeCache_, d, at::kByte);
  const float* in = xc.data_ptr<float>();
  uint8_t* out = codes.data_ptr<uint8_t>();
  uint32_t expMax = 0;
  const int64_t clips = nat::encode(in, d, seed, !options_.deterministic, out, &expMax);
  requireFinite(expMax != 0x7F800000u, "cnat");
  if (clipped) *clipped += clips;
  return codes;
}

at::Tensor NaturalCompression::decodeCodes(const at::Tensor& codes, at::Tensor* cache) {
  at::Tensor out;
  if (cache)
    out = simd::reusableBuffer(*cache, codes.numel(), at::kFloat);
  else
    out = at::empty({codes.numel()}, at::kFloat);
  nat::decode(codes.data_ptr<uint8_t>(), codes.numel(), out.data_ptr<float>());
  return out;
}

Payload NaturalCompression::encode(const at::Tensor& x, Context& ctx) {
  checkGradientLayout(x, "cnat");
  ScopedPhase t(ctx.times, &PhaseTimes::encode);
  Payload p;
  p.tensors.push_back(fastPath(x) ? encodeCodes(x, ctx.privateSeed(), nullptr)
                                  : encodeCodesGeneric(x, ctx.privateSeed(), nullptr));
  return p;
}

at::Tensor NaturalCompression::decode(const Payload& p, int64_t d, Context& ctx) {
  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  GZ_CHECK(p.tensors.size() == 1 && p.tensors[0].numel() == d && p.tensors[0].scalar_type() == at::kByte,
           "cnat: malformed payload for d = {}", d);
  if (!fastPath(p.tensors[0])) return decodeCodesGeneric(p.tensors[0]);
  return decodeCodes(p.tensors[0].contiguous(), &meanCache_);
}

Aggregated NaturalCompression::aggregate(const at::Tensor& x, Context& ctx) {
  checkGradientLayout(x, "cnat");  // finiteness: encodeCodes, fused into the encode pass
  GZ_CHECK(x.numel() > 0, "cnat: empty gradient");
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, "cnat");  // Gloo aborts on mismatched sizes
  std::string how = options_.deployment;
  if (ctx.collectiveName == "ps" || ctx.collectiveName == "allgather") how = ctx.collectiveName;
  GZ_CHECK(ctx.collectiveName == "engine" || ctx.collectiveName == how,
           "cnat: collective '{}' is not supported (a sum of powers of two is not a power of two; use ps or "
           "allgather)",
           ctx.collectiveName);
  const bool fast = fastPath(x);
  return how == "ps" ? aggregatePs(x, ctx, fast) : aggregateAllGather(x, ctx, fast);
}

Aggregated NaturalCompression::aggregatePs(const at::Tensor& x, Context& ctx, bool fast) {
  const int n = ctx.comm.size(), me = ctx.comm.rank();
  const int64_t d = x.numel();
  int64_t clipped = 0;
  at::Tensor codes;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    codes = fast ? encodeCodes(x, ctx.privateSeed(), &clipped) : encodeCodesGeneric(x, ctx.privateSeed(), &clipped);
  }
  const auto off = shardOffsets(d, n);
  std::vector<at::Tensor> uplink(n);
  std::vector<int64_t> downBytes(n);
  for (int j = 0; j < n; ++j) {
    uplink[j] = codes.narrow(0, off[j], off[j + 1] - off[j]).contiguous();
    downBytes[j] = off[j + 1] - off[j] + 8;  // codes + the owner's int64 saturation count
  }
  const uint64_t ownerSeed = deriveSeed(ctx.sharedSeed(), 0xC7A7);
  const bool stochastic = !options_.deterministic;
  auto owner = [&](const std::vector<at::Tensor>& recv) {
    const int64_t len = off[me + 1] - off[me];
    if (!fast) return ownerReduceGeneric(recv, off[me], len, n, ownerSeed);
    auto out = at::empty({len + 8}, at::kByte);
    uint8_t* o = out.data_ptr<uint8_t>();
    int64_t events = 0;
    for (int64_t k = 0; k < len; ++k) {
      // Exact sum of ±2^(e+50) in int64; saturate instead of wrapping (possible
      // only when 8+ workers all send ±2^10 here).
      int64_t sum = 0;
      for (const auto& r : recv) {
        const int64_t v = naturalFixed(r.data_ptr<uint8_t>()[k]);
        if (__builtin_add_overflow(sum, v, &sum)) {
          sum = v > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
          ++events;
        }
      }
      const float mean = static_cast<float>(std::ldexp(static_cast<double>(sum), kNatMinExp) / n);
      bool c = false;
      o[k] = naturalEncode(mean, randomBits(ownerSeed, static_cast<uint64_t>(off[me] + k)), stochastic, &c);
      events += c;
    }
    std::memcpy(o + len, &events, 8);
    return out;
  };
  std::vector<at::Tensor> down;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::communicate);
    down = psExchange(ctx.comm, uplink, owner, downBytes, kCnatTag, ctx.times);
  }
  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  Aggregated r;
  std::vector<at::Tensor> parts, counts;
  int64_t saturated = 0;
  for (int j = 0; j < n; ++j) {
    const int64_t len = off[j + 1] - off[j];
    if (!fast) {
      parts.push_back(decodeCodesGeneric(down[j].narrow(0, 0, len)));
      counts.push_back(down[j].narrow(0, len, 8).clone().view(at::kLong));
      continue;
    }
    parts.push_back(decodeCodes(down[j].narrow(0, 0, len).contiguous()));
    int64_t ev;
    std::memcpy(&ev, down[j].data_ptr<uint8_t>() + len, 8);
    saturated += ev;
  }
  if (!fast) saturated = at::cat(counts).sum().item<int64_t>();  // one read-back for all shards
  r.mean = at::cat(parts);
  r.localApplied = fast ? decodeCodes(codes) : decodeCodesGeneric(codes);
  r.saturated = saturated;  // downlink clips and overflows; uplink clips are local (see localApplied)
  return r;
}

Aggregated NaturalCompression::aggregateAllGather(const at::Tensor& x, Context& ctx, bool fast) {
  const int n = ctx.comm.size(), me = ctx.comm.rank();
  at::Tensor codes;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    codes = fast ? encodeCodes(x, ctx.privateSeed(), nullptr) : encodeCodesGeneric(x, ctx.privateSeed(), nullptr);
  }
  std::vector<at::Tensor> all(n);
  {
    ScopedPhase t(ctx.times, &PhaseTimes::communicate);
    for (auto& a : all) a = at::empty_like(codes);
    if (n > 1) {
      ctx.comm.allGather(all, codes).wait();
      if (ctx.times) ctx.times->bytesSent += codes.numel() * (n - 1);
    } else {
      all[0] = codes;
    }
  }
  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  // Sum in double in rank order: the same operations on every rank.
  auto decoded = [&](const at::Tensor& c) { return fast ? decodeCodes(c.contiguous()) : decodeCodesGeneric(c); };
  auto sum = at::zeros({codes.numel()}, x.options().dtype(at::kDouble));
  for (int i = 0; i < n; ++i) sum += decoded(all[i]).to(at::kDouble);
  Aggregated r;
  r.mean = (sum / n).to(at::kFloat);
  r.localApplied = decoded(all[me]);
  return r;
}

}  // namespace gradzip::compress
