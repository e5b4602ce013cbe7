// Implements the single-worker half of compress/Thc.h: options, sizes, the
// rotation, quantisation and dequantisation shared by both deployments, and the
// encode/decode codec. The collective halves live in ThcAggregate.cpp.
#include "compress/Thc.h"

#include "compress/BitPack.h"
#include "compress/SaturatingPackedSum.h"
#include "compress/SimdKernels.h"
#include "compress/StochasticQuantize.h"
#include "compress/ThcKernels.h"
#include "compress/ThcTableKernels.h"
#include "compress/ThcTable.h"
#include "util/Error.h"

#include <ATen/Parallel.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace gradzip::compress {
namespace {

// Calls f(lo, hi, M[block]) for the runs of [b, e) that lie in one block of B
// coordinates: the per-block range is read once per run, not divided out of
// every index.
template <class F>
void forBlockRuns(int64_t b, int64_t e, int64_t B, F&& f, const float* M) {
  while (b < e) {
    const int64_t blk = b / B, hi = std::min(e, (blk + 1) * B);
    f(b, hi, M[blk]);
    b = hi;
  }
}

// THC §9 (scalability): "the largest granularity and bit budget that a given
// number of workers can handle", (g, b) = (38, 4), (16, 4), (8, 3) for 4, 10
// and 30 workers. A worker count between two of the paper's takes the next
// larger one's pair, so n·g never exceeds the paper's own products (<= 240).
struct PaperPoint {
  int workers, granularity, bits;
};
constexpr PaperPoint kPaperPoints[] = {{4, 38, 4}, {10, 16, 4}, {30, 8, 3}};

const PaperPoint& paperPoint(int n) {
  for (const auto& p : kPaperPoints)
    if (n <= p.workers) return p;
  throw UserError(fmt::format("thc: granularity_rule: paper has (g, b) for at most {} workers (THC sec. 9: (38, 4), "
                              "(16, 4), (8, 3) for 4, 10, 30 workers), this run has {}; set bits and granularity "
                              "(granularity: 0 scales g with n)",
                              kPaperPoints[std::size(kPaperPoints) - 1].workers, n));
}

}  // namespace

const char* const kThcNoTableAllReduce =
    "the table variant is not offered with deployment: allreduce. An all-reduce forwards partial sums at every "
    "hop, not b-bit table indices, so each field would have to carry table values on the g-grid: at least "
    "ceil(log2(g+1)) > bits bits (5 for g = 30), before any headroom for the sum. With fields that wide the "
    "uniform variant (q = that width) has at least as many evenly spaced levels; for g = 30 its 31 levels are "
    "exactly the table's grid, and stochastic quantisation onto a superset of points never has larger variance. "
    "The all-reduce form of the end-to-end-utility paper (sec. 3.2.2) quantises uniformly; use variant: uniform "
    "(aggregation_bits adds headroom), or deployment: ps for the table";

ThcOptions ThcOptions::fromYaml(YamlReader& r) {
  ThcOptions o;
  o.deployment = r.getEnum("deployment", o.deployment, {"ps", "allreduce"});
  o.variant = r.getEnum("variant", o.deployment == "ps" ? "table" : "uniform", {"table", "uniform"});
  if (o.deployment == "allreduce" && o.variant == "table") r.fail("variant", kThcNoTableAllReduce);
  o.bits = static_cast<int>(r.getInt("bits", o.bits, 1, 16));
  // The paper's g = 30 (for b = 4) holds up to b = 4; wider codes need g >= 2^b − 1.
  o.granularity = static_cast<int>(r.getInt("granularity", std::max(o.granularity, (1 << o.bits) - 1), 0, 4096));
  o.p = r.getDouble("p", o.p, 1e-9, 0.999);
  o.symmetricTable = r.getBool("symmetric_table", o.symmetricTable);
  o.rotationBlockLog2 = static_cast<int>(r.getInt("rotation_block_log2", o.rotationBlockLog2, 0, 40));
  o.aggregationBits = static_cast<int>(r.getInt("aggregation_bits", o.aggregationBits, 0, 16));
  o.range = r.getEnum("range", o.range, {"norm", "max"});
  o.granularityRule = r.getEnum("granularity_rule", o.granularityRule, {"fixed", "paper"});
  if (o.granularityRule == "paper") {
    if (o.deployment != "ps" || o.variant != "table")
      r.fail("granularity_rule", "granularity_rule: paper (THC sec. 9's (g, b) per worker count) is for the ps "
                                 "deployment's table variant");
    for (const char* key : {"bits", "granularity"})
      if (r.has(key))
        r.fail(key, "granularity_rule: paper chooses bits and granularity from the number of workers; leave them "
                    "out, or use granularity_rule: fixed");
  }
  if (o.deployment == "ps" && o.range == "max")
    r.fail("range", "range: max (the block's value range, end-to-end utility sec. 3.2.2) is for deployment: "
                    "allreduce; the ps deployment quantises onto THC's table over t_p·l/sqrt(B)");
  r.finish();
  return o;
}

void ThcOptions::toYaml(YAML::Node& node) const {
  node["deployment"] = deployment;
  node["variant"] = variant.empty() ? (deployment == "ps" ? "table" : "uniform") : variant;
  node["bits"] = bits;
  node["granularity"] = granularity;
  node["p"] = p;
  node["symmetric_table"] = symmetricTable;
  node["rotation_block_log2"] = rotationBlockLog2;
  node["aggregation_bits"] = aggregationBits;
  node["range"] = range;
  node["granularity_rule"] = granularityRule;
}

Thc::Thc(ThcOptions options) : options_(std::move(options)) {
  if (options_.variant.empty()) options_.variant = options_.deployment == "allreduce" ? "uniform" : "table";
  const auto& o = options_;
  if (o.deployment == "allreduce" && o.variant == "table") throw ConfigError(std::string("thc: ") + kThcNoTableAllReduce);
  GZ_CHECK(o.deployment == "ps" || o.deployment == "allreduce", "thc: deployment must be ps or allreduce, got '{}'",
           o.deployment);
  GZ_CHECK(o.variant == "table" || o.variant == "uniform", "thc: variant must be table or uniform, got '{}'",
           o.variant);
  if (o.deployment == "ps") {
    GZ_CHECK(o.bits >= 1 && o.bits <= 8, "thc: the ps deployment needs 1 <= bits <= 8 (uint8 table indices), got {}",
             o.bits);
    GZ_CHECK(o.variant == "uniform" || o.granularity == 0 || o.granularity >= (1 << o.bits) - 1,
             "thc: granularity g = {} must be >= 2^bits - 1 = {} (or 0 for automatic)", o.granularity,
             (1 << o.bits) - 1);
  } else {
    GZ_CHECK(o.bits >= 2 && o.bits <= 16,
             "thc: the allreduce deployment needs 2 <= bits <= 16 (signed saturating codes), got {}", o.bits);
    // The allreduce form quantises uniformly (end-to-end utility §3.2.2).
    GZ_CHECK(o.aggregationBits == 0 || (o.aggregationBits >= o.bits && o.aggregationBits <= 16),
             "thc: aggregation_bits must be 0 or in [bits = {}, 16], got {}", o.bits, o.aggregationBits);
  }
  GZ_CHECK(o.granularityRule == "fixed" ||
               (o.granularityRule == "paper" && o.deployment == "ps" && o.variant == "table"),
           "thc: granularity_rule must be fixed, or paper with deployment: ps and variant: table; got '{}'",
           o.granularityRule);
  GZ_CHECK(o.range == "norm" || (o.range == "max" && o.deployment == "allreduce"),
           "thc: range must be norm, or max with deployment: allreduce; got '{}' with deployment: {}", o.range,
           o.deployment);
  tp_ = thcTruncation(o.p);
}

Capabilities Thc::capabilities() const {
  Capabilities c;
  c.summable = true;  // homomorphic: aggregated in the compressed domain
  c.needsSharedSeed = true;
  c.unbiased = false;  // SQ is unbiased but clamping to [m, M] is not (error feedback fixes it)
  c.collectives = options_.deployment == "ps" ? std::vector<std::string>{"ps"}
                                              : std::vector<std::string>{"ring", "tree", "ps"};
  return c;
}

int Thc::granularityFor(int n) const {
  if (options_.deployment == "allreduce") return 2 * ((1 << (options_.bits - 1)) - 1);
  if (options_.variant == "uniform") return (1 << options_.bits) - 1;
  if (options_.granularityRule == "paper") return paperPoint(n).granularity;
  if (options_.granularity > 0) return options_.granularity;
  return std::max((1 << options_.bits) - 1, std::min(30, 255 / std::max(n, 1)));
}

int Thc::bitsFor(int n) const {
  return options_.granularityRule == "paper" ? paperPoint(n).bits : options_.bits;
}

int Thc::downlinkBits(int n) const {
  // Sums lie in ⟨n·g + 1⟩ (Alg. 2 line 13): ceil(log2(n·g + 1)) bits hold them all.
  const int64_t top = static_cast<int64_t>(n) * granularityFor(n);
  int w = 1;
  while ((int64_t{1} << w) <= top) ++w;
  return w;
}

RandomizedHadamard Thc::rotation(int64_t d) const { return RandomizedHadamard(d, options_.rotationBlockLog2); }

int64_t Thc::payloadBytes(int64_t d, int n) const {
  const auto rht = rotation(d);
  const int64_t norms = 4 * rht.numBlocks();
  if (options_.deployment == "ps") return packedBytes(rht.paddedDim(), bitsFor(n)) + norms;
  const int64_t wordBytes = SaturatingPackedSum::wordType(fieldBits()) == at::kByte ? 1 : 4;
  return SaturatingPackedSum::numWords(rht.paddedDim(), fieldBits()) * wordBytes + norms;
}

double Thc::bitsPerCoordinate(int64_t d, int n) const {
  GZ_CHECK(d > 0, "thc: bitsPerCoordinate needs d > 0");
  return 8.0 * static_cast<double>(payloadBytes(d, n)) / static_cast<double>(d);
}

double Thc::downlinkBitsPerCoordinate(int64_t d, int n) const {
  if (options_.deployment != "ps") return bitsPerCoordinate(d, n);
  GZ_CHECK(d > 0 && n >= 1, "thc: downlinkBitsPerCoordinate needs d > 0 and n >= 1");
  return 8.0 * static_cast<double>(packedBytes(rotation(d).paddedDim(), downlinkBits(n))) / static_cast<double>(d);
}

at::Tensor Thc::blockNorms(const at::Tensor& x, const RandomizedHadamard& rht) {
  // The RHT is orthonormal per block, so a block's norm after rotation equals
  // the norm of the zero-padded block before it (THC §5.2 opt. 1: the norm round
  // runs in parallel with the transform).
  at::Tensor norms = at::empty({rht.numBlocks()}, at::kFloat);
  requireFinite(thc::blockNorms(x.data_ptr<float>(), rht, norms.data_ptr<float>()), "thc");
  return norms;
}

Thc::Quantized Thc::quantize(const at::Tensor& rotated, const at::Tensor& range, const RandomizedHadamard& rht,
                             uint64_t privateSeed) const {
  const int64_t dp = rht.paddedDim(), B = rht.blockSize();
  Quantized q;
  q.range = range.contiguous();
  const float* R = rotated.data_ptr<float>();
  const float* M = q.range.data_ptr<float>();
  q.values = at::empty({dp}, at::kFloat);
  float* X = q.values.data_ptr<float>();
  auto y = at::empty({dp}, at::kFloat);
  float* Y = y.data_ptr<float>();
  const int L = (1 << (options_.bits - 1)) - 1;
  // §3.2.2: signed zero-centred codes, y = clamp(x)·L/M ∈ [−L, L].
  at::parallel_for(0, dp, 16384, [&](int64_t b, int64_t e) {
    forBlockRuns(b, e, B, [&](int64_t lo, int64_t hi, float m) {
      const float scale = m > 0 ? static_cast<float>(L) / m : 0.0f;
      for (int64_t i = lo; i < hi; ++i)
        Y[i] = m > 0 ? std::min(std::max(R[i] * scale, static_cast<float>(-L)), static_cast<float>(L)) : 0.0f;
    }, M);
  });
  q.codes = at::empty({dp}, at::kInt);
  int32_t* C = q.codes.data_ptr<int32_t>();
  quantizeUniform(Y, dp, privateSeed, 0, C);
  forBlockRuns(0, dp, B, [&](int64_t lo, int64_t hi, float m) {
    const float step = m / L;
    for (int64_t i = lo; i < hi; ++i) X[i] = static_cast<float>(C[i]) * step;
  }, M);
  return q;
}

at::Tensor Thc::dequantizeSum(const at::Tensor& sums, const at::Tensor& range, const RandomizedHadamard& rht,
                              int n) const {
  const int64_t dp = rht.paddedDim(), B = rht.blockSize();
  auto out = at::empty({dp}, at::kFloat);
  float* o = out.data_ptr<float>();
  const int32_t* s = sums.data_ptr<int32_t>();
  const float* M = range.data_ptr<float>();
  const float L = static_cast<float>((1 << (options_.bits - 1)) - 1);
  forBlockRuns(0, dp, B, [&](int64_t lo, int64_t hi, float m) {
    const float step = m / L;
    for (int64_t i = lo; i < hi; ++i) o[i] = (static_cast<float>(s[i]) / n) * step;
  }, M);
  return out;
}

std::vector<int> Thc::tableValues(int b, int g) const {
  return options_.variant == "uniform" ? uniformThcTable(b, options_.p).values
                                       : cachedThcTable(b, g, options_.p, options_.symmetricTable).values;
}

const thc::TableLookup& Thc::tableFor(int n) {
  const int g = granularityFor(n), b = bitsFor(n);
  if (!table_ || table_->g != g || table_->ints.size() != (size_t{1} << b))
    table_ = std::make_unique<thc::TableLookup>(TableQuantizer(tableValues(b, g)));
  return *table_;
}

// The table (ps: T(0..2^b−1) and g, empty before the first aggregation) and the
// quantiser's parameters. THC's seeds are counter-based (Context::sharedSeed:
// run seed, bucket, step; privateSeed: that and the rank), so the checkpoint's
// step and the run's seed give a resumed run the same rotations and noise; the
// saved quantiser is what a resumed run must find again.
void Thc::save(torch::serialize::OutputArchive& ar) const {
  ar.write("thc/quantiser", at::tensor({static_cast<double>(options_.bits), options_.p,
                                        static_cast<double>(options_.rotationBlockLog2),
                                        static_cast<double>(fieldBits())},
                                       at::kDouble));
  std::vector<int64_t> table;
  if (table_) table.assign(table_->ints.begin(), table_->ints.end());
  ar.write("thc/table_g", at::tensor({static_cast<int64_t>(table_ ? table_->g : 0)}, at::kLong));
  ar.write("thc/table", at::tensor(table, at::kLong));
}

// Refuses a checkpoint whose quantiser or table is not this THC's (another
// bits, p, block or field width, or a table the solver no longer gives for
// that g): its residual and codes were made by another quantiser. Checkpoints
// written before THC saved anything have no keys and load as before.
void Thc::load(torch::serialize::InputArchive& ar) {
  at::Tensor q, gs, table;
  if (!ar.try_read("thc/quantiser", q)) return;
  GZ_CHECK(ar.try_read("thc/table_g", gs) && ar.try_read("thc/table", table) && q.numel() == 4 && gs.numel() == 1,
           "checkpoint: THC state is malformed");
  const auto* v = q.to(at::kDouble).contiguous().data_ptr<double>();
  GZ_CHECK(v[0] == options_.bits && v[1] == options_.p && v[2] == options_.rotationBlockLog2 && v[3] == fieldBits(),
           "checkpoint: THC was saved with bits {}, p {}, rotation_block_log2 {}, field bits {}; this config has "
           "{}, {}, {}, {}",
           v[0], v[1], v[2], v[3], options_.bits, options_.p, options_.rotationBlockLog2, fieldBits());
  const int g = static_cast<int>(gs.item<int64_t>());
  table_.reset();
  if (g == 0) return;  // saved before the first aggregation: built on demand
  const at::Tensor saved = table.to(at::kLong).contiguous();
  const std::vector<int64_t> got(saved.data_ptr<int64_t>(), saved.data_ptr<int64_t>() + saved.numel());
  // Under granularity_rule: paper the table's b is the paper's for its g.
  int b = options_.bits;
  if (options_.granularityRule == "paper") {
    const auto* p = std::find_if(std::begin(kPaperPoints), std::end(kPaperPoints),
                                 [&](const PaperPoint& q) { return q.granularity == g; });
    GZ_CHECK(p != std::end(kPaperPoints), "checkpoint: THC table for g = {} is not one of granularity_rule: paper's", g);
    b = p->bits;
  }
  const std::vector<int> expected = tableValues(b, g);
  GZ_CHECK(got.size() == expected.size() && std::equal(got.begin(), got.end(), expected.begin()),
           "checkpoint: THC table for g = {} is [{}], this config's is [{}]", g, fmt::join(got, ", "),
           fmt::join(expected, ", "));
  table_ = std::make_unique<thc::TableLookup>(TableQuantizer(expected));
}

at::Tensor Thc::rotateQuantizePs(const at::Tensor& x, const at::Tensor& range, const RandomizedHadamard& rht, int n,
                                 Context& ctx) {
  const int64_t dp = rht.paddedDim();
  rotated_.resize(static_cast<size_t>(dp));
  rht.forwardUnscaled(x.data_ptr<float>(), ctx.sharedSeed(), rotated_.data());
  const int b = bitsFor(n);
  at::Tensor codes = simd::reusableBuffer(codeCache_, packedBytes(dp, b), at::kByte);
  // RandomizedHadamard::forward's orthonormal scale, applied inside the pass.
  thc::quantizeTablePack(rotated_.data(), dp, rht.blockSize(), range.data_ptr<float>(), rht.scale(), tableFor(n), b,
                         ctx.privateSeed(), codes.data_ptr<uint8_t>());
  return codes;
}

at::Tensor Thc::inverseOfRotated(const RandomizedHadamard& rht, uint64_t sharedSeed, at::Tensor& cache) {
  at::Tensor out = simd::reusableBuffer(cache, rht.dim(), at::kFloat);
  rht.inverseInPlace(rotated_.data(), sharedSeed, out.data_ptr<float>());
  return out;
}

double Thc::rangeScale(const RandomizedHadamard& rht) const {
  return tp_ / std::sqrt(static_cast<double>(rht.blockSize()));
}

at::Tensor Thc::rangeOf(const at::Tensor& norms, const RandomizedHadamard& rht) const {
  return (norms.to(at::kDouble) * rangeScale(rht)).to(at::kFloat).contiguous();
}

at::Tensor Thc::blockMaxima(const at::Tensor& rotated, const RandomizedHadamard& rht) {
  return rotated.view({rht.numBlocks(), rht.blockSize()}).abs().amax(1).contiguous();
}

Aggregated Thc::aggregate(const at::Tensor& x, Context& ctx) {
  if (x.is_cpu() && !maxRange()) {
    checkGradientLayout(x, "thc");  // finiteness: checked in the block norms' pass (blockNorms)
  } else {
    checkGradient(x, "thc");
  }
  GZ_CHECK(x.numel() > 0, "thc: empty gradient");
  confirmNumelOnce(&agreedNumel_, x.numel(), ctx, "thc");  // Gloo aborts on mismatched sizes
  if (options_.deployment == "ps") return aggregatePs(x, ctx);
  return maxRange() ? aggregateAllReduceMax(x, ctx) : aggregateAllReduce(x, ctx);
}

Payload Thc::encode(const at::Tensor& x, Context& ctx) {
  if (options_.deployment == "allreduce" && x.is_cpu() && !maxRange()) {
    checkGradientLayout(x, "thc");
    GZ_CHECK(x.numel() > 0, "thc: empty gradient");
    ScopedPhase timer(ctx.times, &PhaseTimes::encode);
    const auto rht = rotation(x.numel());
    // One rank, so no norm round: the block norms come out of the rotation pass.
    at::Tensor norms = simd::reusableBuffer(normCache_, rht.numBlocks(), at::kFloat);
    thc::NormsInPass fused;
    fused.norms = norms.data_ptr<float>();
    fused.rangeScale = rangeScale(rht);
    at::Tensor words = thc::rotateQuantizePack(x.data_ptr<float>(), nullptr, rht, options_.bits, fieldBits(),
                                               ctx.sharedSeed(), ctx.privateSeed(), scratch_, wordCache_, &fused);
    requireFinite(fused.finite, "thc");
    Payload p;
    p.tensors.push_back(norms);
    p.tensors.push_back(words);
    return p;
  }
  if (x.is_cpu() && !maxRange())
    checkGradientLayout(x, "thc");  // finiteness: checked in the block norms' pass (blockNorms)
  else
    checkGradient(x, "thc");
  GZ_CHECK(x.numel() > 0, "thc: empty gradient");
  ScopedPhase timer(ctx.times, &PhaseTimes::encode);
  const auto xc = x.cpu().contiguous();
  const auto rht = rotation(x.numel());
  // The payload's first tensor is what the decoder needs for M: the block norms
  // (THC's range), or the block maxima themselves (range: max).
  Payload p;
  if (options_.deployment == "ps") {
    const at::Tensor norms = blockNorms(xc, rht);
    p.tensors.push_back(norms);
    p.tensors.push_back(rotateQuantizePs(xc, rangeOf(norms, rht), rht, 1, ctx));
    return p;
  }
  at::Tensor header, range;
  const at::Tensor rotated = rht.forward(xc, ctx.sharedSeed());
  if (maxRange()) {
    header = range = blockMaxima(rotated, rht);
  } else {
    header = blockNorms(xc, rht);
    range = rangeOf(header, rht);
  }
  auto q = quantize(rotated, range, rht, ctx.privateSeed());
  p.tensors.push_back(header);
  p.tensors.push_back(SaturatingPackedSum::pack(q.codes, fieldBits()));
  return p;
}

at::Tensor Thc::decode(const Payload& p, int64_t d, Context& ctx) {
  ScopedPhase timer(ctx.times, &PhaseTimes::decode);
  const auto rht = rotation(d);
  GZ_CHECK(p.tensors.size() == 2 && p.tensors[0].numel() == rht.numBlocks(), "thc: malformed payload for d = {}", d);
  if (options_.deployment == "allreduce" && maxRange()) {
    const at::Tensor range = p.tensors[0].cpu().contiguous();
    const auto sums = SaturatingPackedSum::unpack(p.tensors[1], fieldBits(), rht.paddedDim());
    return rht.inverse(dequantizeSum(sums, range, rht, 1), ctx.sharedSeed());
  }
  if (options_.deployment == "allreduce") {
    // Thc::rangeOf without tensor temporaries (the same double product, rounded once).
    const at::Tensor norms = p.tensors[0].cpu().contiguous();
    const float* l = norms.data_ptr<float>();
    const double scale = rangeScale(rht);
    ranges_.resize(static_cast<size_t>(rht.numBlocks()));
    for (int64_t b = 0; b < rht.numBlocks(); ++b) ranges_[b] = static_cast<float>(static_cast<double>(l[b]) * scale);
    return thc::unpackInverse(p.tensors[1], ranges_.data(), rht, options_.bits, fieldBits(), 1, ctx.sharedSeed(),
                              scratch_, meanCache_);
  }
  const auto range = rangeOf(p.tensors[0], rht);
  if (options_.deployment == "ps") {
    const at::Tensor codes = p.tensors[1].cpu().contiguous();
    const int b = bitsFor(1);
    GZ_CHECK(codes.scalar_type() == at::kByte && codes.numel() == packedBytes(rht.paddedDim(), b),
             "thc: malformed payload for d = {}: {} code bytes, expected {}", d, codes.numel(),
             packedBytes(rht.paddedDim(), b));
    rotated_.resize(static_cast<size_t>(rht.paddedDim()));
    thc::dequantizeCodes(codes.data_ptr<uint8_t>(), b, rht.paddedDim(), rht.blockSize(),
                         range.data_ptr<float>(), tableFor(1), rotated_.data());
    return inverseOfRotated(rht, ctx.sharedSeed(), meanCache_);
  }
  const auto sums = SaturatingPackedSum::unpack(p.tensors[1], fieldBits(), rht.paddedDim());
  return rht.inverse(dequantizeSum(sums, range, rht, 1), ctx.sharedSeed());
}

}  // namespace gradzip::compress
