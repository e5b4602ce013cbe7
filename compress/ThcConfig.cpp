// Implements the configuration half of compress/Thc.h: the options and their
// checks, the (g, b) a worker count gets (THC §9's points or the fixed ones),
// the wire sizes they imply, the quantisation table, and the table's checkpoint.
// None of it touches a gradient; the codec is in Thc.cpp, the collective forms
// in ThcAggregate.cpp.
#include "compress/Thc.h"

#include "compress/ThcTable.h"
#include "compress/kernels/BitPack.h"
#include "compress/kernels/SaturatingPackedSum.h"
#include "compress/kernels/StochasticQuantize.h"
#include "compress/kernels/ThcTableKernels.h"
#include "util/Error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>

namespace gradzip::compress {
namespace {

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

}  // namespace gradzip::compress
