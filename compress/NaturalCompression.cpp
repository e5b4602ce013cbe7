// Implements compress/NaturalCompression.h: the bit-level C_nat, its 8-bit wire
// code, and the parameter-server and all-gather aggregations.
#include "compress/NaturalCompression.h"

#include "compress/CounterRng.h"
#include "compress/ShardedExchange.h"
#include "compress/SimdKernels.h"
#include "util/Error.h"

#include <ATen/Parallel.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

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

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
#define GZ_NAT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GZ_NAT_CLONES
#endif

// naturalEncode for x[0, n) in one branch-free loop (so it vectorises), with the
// randomness of element i from naturalNoise(seed, first + i). Returns the
// number of exponents clipped at 2^10 and raises *expMax to x's largest
// exponent field (finiteness test, SimdKernels.cpp).
GZ_NAT_CLONES int64_t encodeLoop(const float* __restrict x, int64_t n, uint64_t seed, uint64_t first,
                                 bool stochastic, uint8_t* __restrict out, uint32_t* expMax) {
  constexpr uint32_t kLowestBits = static_cast<uint32_t>(kNatMinExp + 127) << 23;  // bits of 2^-50
  const float lowest = std::ldexp(1.0f, kNatMinExp);
  int64_t clipped = 0;
  uint32_t mx = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const uint32_t ef = u & 0x7F800000u;
    mx = ef > mx ? ef : mx;
    const uint64_t rnd = naturalNoise(seed, first + static_cast<uint64_t>(i));
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7FFFFFFFu;
    // Definition 1 on the bits: (|t| + r) & 0xFF800000, r uniform in [0, 2^23)
    // (2^22: nearest power of two). Its exponent field minus 127 is e.
    const uint32_t r = stochastic ? static_cast<uint32_t>(rnd) & 0x7FFFFFu : 0x400000u;
    const int32_t e = static_cast<int32_t>((a + r) >> 23) - 127;
    const int32_t big = e > kNatMaxExp;
    clipped += big;
    const uint32_t normal = sign | 0x40u | static_cast<uint32_t>((big ? kNatMaxExp : e) - kNatMinExp);
    // Below 2^-50: 2^-50 with probability |t|/2^-50 (nearer of 0, 2^-50 when deterministic).
    float av;
    std::memcpy(&av, &a, 4);
    const float uf = static_cast<float>(rnd & 0x7FFFFF) * (1.0f / 8388608.0f);
    const bool up = stochastic ? uf * lowest < av : 2 * av >= lowest;
    const uint32_t tiny = up ? (sign | 0x40u) : 0u;
    out[i] = static_cast<uint8_t>(a < kLowestBits ? tiny : normal);
  }
  *expMax = mx > *expMax ? mx : *expMax;
  return clipped;
}

// naturalDecode for codes[0, n): ±2^((c & 0x3F) − 50), or 0 without the non-zero flag.
GZ_NAT_CLONES void decodeLoop(const uint8_t* __restrict codes, int64_t n, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t c = codes[i];
    const uint32_t bits = ((c & 0x80u) << 24) | (((c & 0x3Fu) + static_cast<uint32_t>(kNatMinExp + 127)) << 23);
    const uint32_t v = (c & 0x40u) ? bits : 0u;
    std::memcpy(out + i, &v, 4);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// encodeLoop with AVX-512 (F, DQ, BW, VL), 16 coordinates per step: the same
// splitmix64 words (64-bit multiplies need DQ) and the same integer recipe, so
// the codes equal the portable loop's bit for bit.
// randomBits for the 8 counters whose splitmix64 states are z (CounterRng.h:
// state_i = seed + (i + 1)·γ, kept incrementally by the caller, so only the
// finaliser's two multiplies remain per word).
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) inline __m512i finalise8(__m512i z) {
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ULL));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebULL));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

// encodeLoop with AVX-512 for coordinates 0.. of the stream (first = 0): each
// splitmix64 word's two 32-bit halves are the noise of two neighbouring
// coordinates, which is exactly the 16 x 32-bit view of 8 words.
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) int64_t encode512(
    const float* x, int64_t n, uint64_t seed, bool stochastic, uint8_t* out, uint32_t* expMax) {
  const int64_t body = n / 16 * 16;
  constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
  // States seed + (w + 1)·γ of words w = 0..7; +8γ per step of 16 coordinates.
  alignas(64) uint64_t start[8];
  for (int l = 0; l < 8; ++l) start[l] = seed + (static_cast<uint64_t>(l) + 1) * kGamma;
  __m512i state = _mm512_load_si512(start);
  const __m512i step8 = _mm512_set1_epi64(static_cast<long long>(8 * kGamma));
  const __m512i expMask = _mm512_set1_epi32(0x7F800000);
  const __m512i absMask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i m23 = _mm512_set1_epi32(0x7FFFFF);
  const __m512i half23 = _mm512_set1_epi32(0x400000);
  const __m512i flag = _mm512_set1_epi32(0x40);
  const __m512i signBit = _mm512_set1_epi32(0x80);
  const __m512i maxE = _mm512_set1_epi32(kNatMaxExp);
  const __m512i bias = _mm512_set1_epi32(127 + kNatMinExp);  // e − kNatMinExp = field − 127 + 50
  const __m512i lowBits = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(kNatMinExp + 127) << 23));
  const __m512 lowest = _mm512_set1_ps(std::ldexp(1.0f, kNatMinExp));
  const __m512 inv23 = _mm512_set1_ps(1.0f / 8388608.0f);
  __m512i mx = _mm512_setzero_si512();
  int64_t clipped = 0;
  for (int64_t i = 0; i < body; i += 16) {
    const __m512i r23 = _mm512_and_si512(finalise8(state), m23);  // lane 2k: word k low half; 2k+1: high
    state = _mm512_add_epi64(state, step8);
    const __m512i u = _mm512_loadu_si512(x + i);
    mx = _mm512_max_epu32(mx, _mm512_and_si512(u, expMask));
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), signBit);
    const __m512i a = _mm512_and_si512(u, absMask);
    const __m512i r = stochastic ? r23 : half23;
    const __m512i field = _mm512_srli_epi32(_mm512_add_epi32(a, r), 23);  // e + 127
    const __m512i e = _mm512_sub_epi32(field, _mm512_set1_epi32(127));
    const __mmask16 big = _mm512_cmpgt_epi32_mask(e, maxE);
    clipped += __builtin_popcount(static_cast<unsigned>(big));
    const __m512i ec = _mm512_min_epi32(e, maxE);
    const __m512i normal =
        _mm512_or_si512(_mm512_or_si512(sign, flag), _mm512_sub_epi32(_mm512_add_epi32(ec, _mm512_set1_epi32(127)), bias));
    const __m512 av = _mm512_castsi512_ps(a);
    const __mmask16 up =
        stochastic ? _mm512_cmp_ps_mask(_mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(r23), inv23), lowest), av, _CMP_LT_OQ)
                   : _mm512_cmp_ps_mask(_mm512_add_ps(av, av), lowest, _CMP_GE_OQ);
    const __m512i tiny = _mm512_maskz_mov_epi32(up, _mm512_or_si512(sign, flag));
    const __mmask16 small = _mm512_cmplt_epu32_mask(a, lowBits);
    const __m512i code = _mm512_mask_mov_epi32(normal, small, tiny);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(code));
  }
  uint32_t m = _mm512_reduce_max_epu32(mx);
  clipped += encodeLoop(x + body, n - body, seed, static_cast<uint64_t>(body), stochastic, out + body, &m);
  *expMax = m > *expMax ? m : *expMax;
  return clipped;
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void decode512(const uint8_t* codes, int64_t n, float* out) {
  const int64_t body = n / 16 * 16;
  const __m512i low6 = _mm512_set1_epi32(0x3F), flag = _mm512_set1_epi32(0x40), sign = _mm512_set1_epi32(0x80);
  const __m512i bias = _mm512_set1_epi32(kNatMinExp + 127);
  // Large outputs: non-temporal stores (simd::kStreamBytes).
  const bool stream = n * 4 >= simd::kStreamBytes && reinterpret_cast<uintptr_t>(out) % 64 == 0;
  for (int64_t i = 0; i < body; i += 16) {
    const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    const __m512i bits = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(c, sign), 24),
                                         _mm512_slli_epi32(_mm512_add_epi32(_mm512_and_si512(c, low6), bias), 23));
    const __mmask16 nz = _mm512_test_epi32_mask(c, flag);
    if (stream)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), _mm512_maskz_mov_epi32(nz, bits));
    else
      _mm512_storeu_si512(out + i, _mm512_maskz_mov_epi32(nz, bits));
  }
  if (stream) _mm_sfence();
  decodeLoop(codes + body, n - body, out + body);
}
#endif

int64_t encodeAll(const float* x, int64_t n, uint64_t seed, bool stochastic, uint8_t* out, uint32_t* expMax) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (simd::haveAvx512()) return encode512(x, n, seed, stochastic, out, expMax);
#endif
  return encodeLoop(x, n, seed, 0, stochastic, out, expMax);
}

void decodeAll(const uint8_t* codes, int64_t n, float* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (simd::haveAvx512()) return decode512(codes, n, out);
#endif
  decodeLoop(codes, n, out);
}

}  // namespace

at::Tensor NaturalCompression::encodeCodes(const at::Tensor& x, uint64_t seed, int64_t* clipped) {
  auto xc = x.cpu().contiguous();
  const int64_t d = xc.numel();
  auto codes = simd::reusableBuffer(codeCache_, d, at::kByte);
  const float* in = xc.data_ptr<float>();
  uint8_t* out = codes.data_ptr<uint8_t>();
  uint32_t expMax = 0;
  const int64_t clips = encodeAll(in, d, seed, !options_.deterministic, out, &expMax);
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
  decodeAll(codes.data_ptr<uint8_t>(), codes.numel(), out.data_ptr<float>());
  return out;
}

Payload NaturalCompression::encode(const at::Tensor& x, Context& ctx) {
  checkGradientLayout(x, "cnat");
  ScopedPhase t(ctx.times, &PhaseTimes::encode);
  Payload p;
  p.tensors.push_back(encodeCodes(x, ctx.privateSeed(), nullptr));
  return p;
}

at::Tensor NaturalCompression::decode(const Payload& p, int64_t d, Context& ctx) {
  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  GZ_CHECK(p.tensors.size() == 1 && p.tensors[0].numel() == d && p.tensors[0].scalar_type() == at::kByte,
           "cnat: malformed payload for d = {}", d);
  return decodeCodes(p.tensors[0].cpu().contiguous(), &meanCache_);
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
  return how == "ps" ? aggregatePs(x, ctx) : aggregateAllGather(x, ctx);
}

Aggregated NaturalCompression::aggregatePs(const at::Tensor& x, Context& ctx) {
  const int n = ctx.comm.size(), me = ctx.comm.rank();
  const int64_t d = x.numel();
  int64_t clipped = 0;
  at::Tensor codes;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    codes = encodeCodes(x, ctx.privateSeed(), &clipped);
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
  std::vector<at::Tensor> parts;
  int64_t saturated = 0;
  for (int j = 0; j < n; ++j) {
    const int64_t len = off[j + 1] - off[j];
    parts.push_back(decodeCodes(down[j].narrow(0, 0, len).contiguous()));
    int64_t ev;
    std::memcpy(&ev, down[j].data_ptr<uint8_t>() + len, 8);
    saturated += ev;
  }
  r.mean = at::cat(parts).to(x.device());
  r.localApplied = decodeCodes(codes).to(x.device());
  r.saturated = saturated;  // downlink clips and overflows; uplink clips are local (see localApplied)
  return r;
}

Aggregated NaturalCompression::aggregateAllGather(const at::Tensor& x, Context& ctx) {
  const int n = ctx.comm.size(), me = ctx.comm.rank();
  at::Tensor codes;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    codes = encodeCodes(x, ctx.privateSeed(), nullptr);
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
  auto sum = at::zeros({codes.numel()}, at::kDouble);
  for (int i = 0; i < n; ++i) sum += decodeCodes(all[i].contiguous()).to(at::kDouble);
  Aggregated r;
  r.mean = (sum / n).to(at::kFloat).to(x.device());
  r.localApplied = decodeCodes(all[me].contiguous()).to(x.device());
  return r;
}

}  // namespace gradzip::compress
