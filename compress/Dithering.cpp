// Implements compress/Dithering.h.
#include "compress/Dithering.h"

#include "compress/ShardedExchange.h"
#include "compress/kernels/BitPack.h"
#include "compress/kernels/CounterRng.h"
#include "util/Error.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace gradzip::compress {
namespace {
constexpr int kDitheringTag = 0x4454;  // ps: this tag and the next (psExchange); ring: the two after
}  // namespace

double parseNormOrder(const std::string& text, const std::string& who) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  double p = 0;
  try {
    size_t used = 0;
    p = std::stod(text, &used);
    GZ_CHECK(used == text.size(), "{}: norm must be a number >= 1 or 'inf', got '{}'", who, text);
  } catch (const std::logic_error&) {
    GZ_CHECK(false, "{}: norm must be a number >= 1 or 'inf', got '{}'", who, text);
  }
  GZ_CHECK(p >= 1, "{}: norm order p must be >= 1 (so that |x_i|/||x||_p <= 1), got {}", who, p);
  return p;
}

Dithering::Dithering(std::string name, std::vector<float> levels, double pNorm, std::string deployment,
                     int64_t bucket)
    : name_(std::move(name)),
      levels_(std::move(levels)),
      pNorm_(pNorm),
      deployment_(std::move(deployment)),
      bucket_(bucket) {
  GZ_CHECK(bucket_ >= 0, "{}: bucket must be >= 0 (0 = one norm for the whole vector), got {}", name_, bucket_);
  GZ_CHECK(deployment_ == "allgather" || deployment_ == "ps" || deployment_ == "ring",
           "{}: deployment must be allgather, ps or ring, got '{}'", name_, deployment_);
  GZ_CHECK(levels_.size() >= 2 && levels_.front() == 0.0f && levels_.back() == 1.0f,
           "{}: levels must run from 0 to 1", name_);
  for (size_t j = 0; j + 1 < levels_.size(); ++j)
    GZ_CHECK(levels_[j] < levels_[j + 1], "{}: levels must be strictly increasing", name_);
  GZ_CHECK(pNorm_ >= 1, "{}: norm order p must be >= 1, got {}", name_, pNorm_);
  const int64_t s = static_cast<int64_t>(levels_.size()) - 1;
  indexBits_ = 0;
  while ((int64_t{1} << indexBits_) < s + 1) ++indexBits_;
  codeBits_ = indexBits_ + 1;
  GZ_CHECK(codeBits_ <= 31, "{}: too many levels", name_);
}

Capabilities Dithering::capabilities() const {
  Capabilities c;
  c.summable = false;
  c.needsSharedSeed = false;
  c.unbiased = true;
  c.collectives = {"allgather", "ps", "ring"};
  return c;
}

int64_t Dithering::bucketLength(int64_t d) const { return bucket_ > 0 ? std::min(bucket_, d) : d; }

int64_t Dithering::messageBytes(int64_t d) const {
  const int64_t b = bucketLength(d);
  const int64_t buckets = b > 0 ? (d + b - 1) / b : 1;  // an empty message still carries one (zero) norm
  return 4 * buckets + packedBytes(d, codeBits_);
}

double Dithering::bitsPerCoordinate(int64_t d, int n) const {
  GZ_CHECK(d > 0, "{}: bitsPerCoordinate needs d > 0", name_);
  if (deployment_ == "allgather" || n <= 1) return 8.0 * static_cast<double>(messageBytes(d)) / static_cast<double>(d);
  const auto off = shardOffsets(d, n);
  int64_t bytes = 0;
  for (int j = 0; j < n; ++j) bytes += messageBytes(off[j + 1] - off[j]);
  return 8.0 * static_cast<double>(bytes) / static_cast<double>(d);
}

at::Tensor Dithering::bucketNorms(const at::Tensor& x) const {
  const int64_t d = x.numel(), b = bucketLength(d);
  if (d == 0) return at::zeros({1}, x.options().dtype(at::kFloat));
  const int64_t full = d / b, tail = d - full * b;
  const auto xd = x.reshape({-1}).to(at::kDouble);
  auto norms = at::empty({full + (tail > 0 ? 1 : 0)}, x.options().dtype(at::kDouble));
  auto rowNorms = [&](const at::Tensor& rows) {
    return std::isinf(pNorm_) ? rows.abs().amax(1) : rows.norm(pNorm_, 1);
  };
  if (full > 0) norms.narrow(0, 0, full).copy_(rowNorms(xd.narrow(0, 0, full * b).view({full, b})));
  if (tail > 0) norms.narrow(0, full, 1).copy_(rowNorms(xd.narrow(0, full * b, tail).view({1, tail})));
  return norms.to(at::kFloat);
}

at::Tensor Dithering::encodeMessage(const at::Tensor& xIn, uint64_t seed, bool fast) const {
  if (!fast) return encodeMessageGeneric(xIn, seed);
  auto x = xIn.contiguous();
  const int64_t d = x.numel(), bucket = std::max<int64_t>(bucketLength(d), 1);
  const auto norms = bucketNorms(x);
  const float* nrm = norms.data_ptr<float>();
  auto codes = at::empty({d}, at::kInt);
  const float* in = x.data_ptr<float>();
  int32_t* c = codes.data_ptr<int32_t>();
  const int s = static_cast<int>(levels_.size()) - 1;
  const float* lv = levels_.data();
  const int64_t buckets = (d + bucket - 1) / bucket;
  at::parallel_for(0, buckets, std::max<int64_t>(1, 16384 / bucket), [&](int64_t kb, int64_t ke) {
    for (int64_t i = kb * bucket; i < std::min(d, ke * bucket); ++i) {
      const float norm = nrm[i / bucket];  // i / bucket: one division next to upper_bound's ~4 compares
      const float y = norm > 0 ? std::min(std::fabs(in[i]) / norm, 1.0f) : 0.0f;
      // The interval [lv[j], lv[j+1]] containing y (Definition 3).
      int j = static_cast<int>(std::upper_bound(lv, lv + s + 1, y) - lv) - 1;
      j = std::clamp(j, 0, s - 1);
      const float lo = lv[j], hi = lv[j + 1];
      const bool up = uniform01(seed, static_cast<uint64_t>(i)) * (hi - lo) < (y - lo);
      const int level = j + (up ? 1 : 0);
      c[i] = (std::signbit(in[i]) ? (1 << indexBits_) : 0) | level;  // sign bit above the level index
    }
  });
  auto msg = at::empty({messageBytes(d)}, at::kByte);
  const int64_t header = 4 * norms.numel();
  std::memcpy(msg.data_ptr<uint8_t>(), nrm, header);
  auto packed = packBits(codes, codeBits_);
  msg.narrow(0, header, packed.numel()).copy_(packed);
  return msg;
}

at::Tensor Dithering::decodeMessage(const at::Tensor& msgIn, int64_t d, bool fast) const {
  if (!fast) return decodeMessageGeneric(msgIn, d);
  auto msg = msgIn.contiguous();
  GZ_CHECK(msg.scalar_type() == at::kByte && msg.numel() == messageBytes(d), "{}: malformed payload for d = {}",
           name_, d);
  const int64_t bucket = std::max<int64_t>(bucketLength(d), 1);
  const int64_t header = messageBytes(d) - packedBytes(d, codeBits_);
  std::vector<float> norms(header / 4);
  std::memcpy(norms.data(), msg.data_ptr<uint8_t>(), header);
  auto codes = unpackBits(msg.narrow(0, header, msg.numel() - header).contiguous(), codeBits_, d, at::kInt);
  auto out = at::empty({d}, at::kFloat);
  const int32_t* c = codes.data_ptr<int32_t>();
  float* o = out.data_ptr<float>();
  const int32_t mask = (1 << indexBits_) - 1;
  const int s = static_cast<int>(levels_.size()) - 1;
  for (int64_t k = 0, i = 0; i < d; ++k) {
    for (const int64_t e = std::min(d, i + bucket); i < e; ++i) {
      const int level = std::min(c[i] & mask, s);
      const float v = norms[k] * levels_[level];
      o[i] = (c[i] >> indexBits_) ? -v : v;
    }
  }
  return out;
}

Payload Dithering::encode(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name_);
  ScopedPhase t(ctx.times, &PhaseTimes::encode);
  Payload p;
  p.tensors.push_back(encodeMessage(x, ctx.privateSeed(), fastPath(x)));
  return p;
}

at::Tensor Dithering::decode(const Payload& p, int64_t d, Context& ctx) {
  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  GZ_CHECK(p.tensors.size() == 1, "{}: malformed payload", name_);
  return decodeMessage(p.tensors[0], d, fastPath(p.tensors[0]));
}

Aggregated Dithering::aggregate(const at::Tensor& x, Context& ctx) {
  checkGradient(x, name_);
  GZ_CHECK(x.numel() > 0, "{}: empty gradient", name_);
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, name_);  // Gloo aborts on mismatched sizes
  std::string how = deployment_;
  if (ctx.collectiveName == "ps" || ctx.collectiveName == "allgather" || ctx.collectiveName == "ring")
    how = ctx.collectiveName;
  GZ_CHECK(ctx.collectiveName == "engine" || ctx.collectiveName == how,
           "{}: collective '{}' is not supported (each worker has its own norm, so partial sums cannot be "
           "added in the compressed domain; use allgather, ps or ring)",
           name_, ctx.collectiveName);
  const bool fast = fastPath(x);
  if (how == "ps") return aggregatePs(x, ctx, fast);
  if (how == "ring") return aggregateRing(x, ctx, fast);
  return aggregateAllGather(x, ctx, fast);
}

Aggregated Dithering::aggregateRing(const at::Tensor& xIn, Context& ctx, bool fast) {
  const int n = ctx.comm.size(), me = ctx.comm.rank();
  const auto x = xIn.contiguous();
  const int64_t d = x.numel();
  const auto off = shardOffsets(d, n);
  auto seg = [&](int j) { return x.narrow(0, off[j], off[j + 1] - off[j]); };
  auto len = [&](int j) { return off[j + 1] - off[j]; };
  auto mod = [n](int v) { return ((v % n) + n) % n; };
  const int next = mod(me + 1), prev = mod(me - 1);
  std::vector<at::Tensor> msg(n);  // the current message of each segment this rank holds
  at::Tensor ownDecoded;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    msg[me] = encodeMessage(seg(me), deriveSeed(ctx.privateSeed(), 0), fast);
    ownDecoded = decodeMessage(msg[me], len(me), fast);
  }
  int64_t sent = 0;
  // Reduce-scatter: at hop k send segment me − k, receive segment me − k − 1,
  // decode it, add this rank's own part in float and dither the sum again.
  for (int k = 0; k + 1 < n; ++k) {
    const int out = mod(me - k), in = mod(me - k - 1);
    at::Tensor incoming = at::empty({messageBytes(len(in))}, x.options().dtype(at::kByte));
    {
      ScopedPhase t(ctx.times, &PhaseTimes::communicate);
      std::vector<comm::Work> works{ctx.comm.recv(incoming, prev, kDitheringTag + 2),
                                    ctx.comm.send(msg[out], next, kDitheringTag + 2)};
      comm::waitAll(works);
      sent += msg[out].numel();
    }
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    const at::Tensor partial = decodeMessage(incoming, len(in), fast).add_(seg(in));
    msg[in] = encodeMessage(partial, deriveSeed(ctx.privateSeed(), static_cast<uint64_t>(k + 1)), fast);
  }
  // All-gather: the fully reduced message of segment me + 1 goes round unchanged.
  for (int k = 0; k + 1 < n; ++k) {
    const int out = mod(me + 1 - k), in = mod(me - k);
    at::Tensor incoming = at::empty({messageBytes(len(in))}, x.options().dtype(at::kByte));
    ScopedPhase t(ctx.times, &PhaseTimes::communicate);
    std::vector<comm::Work> works{ctx.comm.recv(incoming, prev, kDitheringTag + 3),
                                  ctx.comm.send(msg[out], next, kDitheringTag + 3)};
    comm::waitAll(works);
    sent += msg[out].numel();
    msg[in] = incoming;
  }
  if (ctx.times) ctx.times->bytesSent += sent;
  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  std::vector<at::Tensor> parts(n);
  for (int j = 0; j < n; ++j) parts[j] = decodeMessage(msg[j], len(j), fast).div_(n);  // the sum of n ranks, / n
  Aggregated r;
  r.mean = at::cat(parts);
  // What entered from this rank: its own segment dithered, the others in float.
  r.localApplied = x.clone();
  r.localApplied.narrow(0, off[me], len(me)).copy_(ownDecoded);
  return r;
}

Aggregated Dithering::aggregatePs(const at::Tensor& xIn, Context& ctx, bool fast) {
  const int n = ctx.comm.size(), me = ctx.comm.rank();
  const auto x = xIn.contiguous();
  const int64_t d = x.numel();
  const auto off = shardOffsets(d, n);
  std::vector<at::Tensor> uplink(n);
  std::vector<int64_t> downBytes(n);
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    // Each shard is dithered on its own (its own norm header, its own noise stream).
    for (int j = 0; j < n; ++j) {
      const int64_t len = off[j + 1] - off[j];
      uplink[j] =
          encodeMessage(x.narrow(0, off[j], len), deriveSeed(ctx.privateSeed(), static_cast<uint64_t>(j)), fast);
      downBytes[j] = messageBytes(len);
    }
  }
  const int64_t myLen = off[me + 1] - off[me];
  const uint64_t ownerSeed = deriveSeed(ctx.sharedSeed(), 0xD17E + static_cast<uint64_t>(me));
  // The owner: decode the n contributions, average in double in rank order,
  // dither the mean again (natural-compression Alg. 1: compression both ways).
  auto owner = [&](const std::vector<at::Tensor>& recv) {
    auto sum = at::zeros({myLen}, x.options().dtype(at::kDouble));
    for (const auto& m : recv) sum += decodeMessage(m, myLen, fast).to(at::kDouble);
    return encodeMessage((sum / n).to(at::kFloat), ownerSeed, fast);
  };
  std::vector<at::Tensor> down;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::communicate);
    down = psExchange(ctx.comm, uplink, owner, downBytes, kDitheringTag, ctx.times);
  }
  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  std::vector<at::Tensor> mean(n), mine(n);
  for (int j = 0; j < n; ++j) {
    const int64_t len = off[j + 1] - off[j];
    mean[j] = decodeMessage(down[j], len, fast);
    mine[j] = decodeMessage(uplink[j], len, fast);
  }
  Aggregated r;
  r.mean = at::cat(mean);
  r.localApplied = at::cat(mine);
  return r;
}

Aggregated Dithering::aggregateAllGather(const at::Tensor& x, Context& ctx, bool fast) {
  const int n = ctx.comm.size(), me = ctx.comm.rank();
  const int64_t d = x.numel();
  at::Tensor msg;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    msg = encodeMessage(x, ctx.privateSeed(), fast);
  }
  std::vector<at::Tensor> all(n);
  {
    ScopedPhase t(ctx.times, &PhaseTimes::communicate);
    if (n > 1) {
      for (auto& a : all) a = at::empty_like(msg);
      ctx.comm.allGather(all, msg).wait();
      if (ctx.times) ctx.times->bytesSent += msg.numel() * (n - 1);
    } else {
      all[0] = msg;
    }
  }
  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  auto sum = at::zeros({d}, x.options().dtype(at::kDouble));
  for (int i = 0; i < n; ++i) sum += decodeMessage(all[i], d, fast).to(at::kDouble);  // rank order on every rank
  Aggregated r;
  r.mean = (sum / n).to(at::kFloat);
  r.localApplied = decodeMessage(all[me], d, fast);
  return r;
}

}  // namespace gradzip::compress
