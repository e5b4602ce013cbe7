// THC, Tensor Homomorphic Compression (THC paper Alg. 1–3), in two deployments.
//
// Common pipeline (Alg. 3): one all-reduce MAX of the workers' (block) norms l;
// R_i = RHT(x_i) with the shared ±1 diagonal (compress/kernels/Hadamard.h, zero padding
// to a power of two, orthonormal); range M = t_p·l/sqrt(B), m = −M (§5.2,
// t_p = Φ⁻¹(1−p/2)); clamp R_i to [m, M]; stochastic quantisation with the
// worker's private noise; the mean is RHT⁻¹ of the decoded aggregate. The
// worker's own quantised vector X_i decodes to localApplied = RHT⁻¹(X_i), so the
// ErrorFeedback decorator keeps e_i = x_i − RHT⁻¹(X_i) (clamping bias + SQ noise).
//
// deployment "ps" (the paper's): table-based (Alg. 2, optimal table from
// compress/ThcTable.h) or uniform (Alg. 1 = the identity table with
// g = 2^b − 1). Workers send b-bit table indices, packed, to the shard owners
// of a co-located sharded parameter server (compress/ShardedExchange.h); an
// owner looks them up, adds the integers (range ⟨n·g+1⟩) and returns the sums
// packed in w = ceil(log2(n·g+1)) bits, so nothing can overflow. The codec's
// passes after the rotation are the fused tiles of compress/kernels/ThcTableKernels.h.
//
// deployment "allreduce" (end-to-end-utility paper §3.2.2): partial rotation
// (blocks of 2^rotation_block_log2, each with its own range), uniform SQ to
// signed zero-centred codes in [−L, L], L = 2^(q−1)−1 (q = bits), aggregated by
// the saturating add in b-bit fields (b = aggregation_bits, default q) at every hop of a ring/tree/ps collective on packed
// words (compress/kernels/SaturatingPackedSum.h); Aggregated::saturated counts the clip
// events summed over all ranks' combines (= the number of saturated
// coordinates when each coordinate clips at most once, e.g. n = 2). What the
// clips removed is part of localApplied: a rank's combines record s − Sat(s)
// at each coordinate they clip (Λ_i, in code units), and localApplied =
// RHT⁻¹((C_i − Λ_i)·M/L). Since S = Σ_i C_i − Σ_i Λ_i, (1/n)·Σ_i localApplied_i
// = mean even when the sum saturates, so error feedback keeps the clipped
// part (Σ_i e_i = Σ_i x_i − n·mean) and the vNMSE measured from localApplied
// counts it. The rank whose combine clipped keeps the whole loss: the paper
// gives no rule, and error feedback needs only the sum over ranks. The range
// of a block is THC's M = t_p·l/sqrt(B) by default (`range: norm`), or, with
// `range: max`, the value range that §3.2.2 computes after the partial
// rotation: M = the largest |R| in the block over all workers (all-reduce MAX
// after the rotation instead of before it), so nothing is clamped and the
// codes concentrate near 0, which saturates less at the price of a coarser
// step M/L.
//
// Both deployments and range modes run on the CPU kernels named above for
// CPU tensors (Compressor::fastPath), and otherwise on a device-generic path
// in ATen operations (ThcGeneric.cpp, ThcGenericAggregate.cpp) with the same
// rotation, noise streams and wire formats.
#pragma once

#include "compress/Compressor.h"
#include "compress/kernels/Hadamard.h"
#include "compress/kernels/ThcTableKernels.h"
#include "util/Yaml.h"

#include <memory>
#include <string>
#include <vector>

namespace gradzip::compress {

// Why the allreduce deployment offers no table variant (the ConfigError text).
extern const char* const kThcNoTableAllReduce;

struct ThcOptions {
  std::string deployment = "ps";  // "ps" | "allreduce"
  // "table" | "uniform"; empty = the deployment's own (ps: table, allreduce:
  // uniform). The allreduce deployment refuses "table" (ConfigError; see
  // kThcNoTableAllReduce for why).
  std::string variant;
  int bits = 4;                   // b: bits per coordinate sent
  // g for the table variant; 0 = from n: g = max(2^b−1, min(30, floor(255/n)))
  // keeps the downlink at 8 bits while it can (the paper scales g down with n).
  int granularity = 30;           // default 30 (the paper's), or 2^b − 1 when b >= 5
  // "fixed": `bits` and `granularity` as given. "paper": (g, b) from the number
  // of workers n as THC §9's scalability runs choose them ("the largest
  // granularity and bit budget that a given number of workers can handle"):
  // (38, 4) for n <= 4, (16, 4) for n <= 10, (8, 3) for n <= 30, so the sums
  // fit the 8-bit downlink (n·g <= 240); more workers are a UserError (the
  // paper gives no point there). ps deployment and table variant only; `bits`
  // and `granularity` must then be left out (ConfigError).
  std::string granularityRule = "fixed";
  double p = 1.0 / 32;         // support bound: expected fraction clamped
  bool symmetricTable = true;  // the paper's reflected tables (false: unconstrained optimum)
  int rotationBlockLog2 = 0;   // 0 = full RHT; else partial rotation in 2^l' blocks
  // allreduce: width of the saturating fields on the wire (the paper's b, with
  // `bits` its q); 0 = bits (b = q, §3.2.3). b > q trades traffic for headroom
  // (the paper's baseline b = 8, q = 4 never saturates below 19 workers).
  int aggregationBits = 0;
  // allreduce: the per-block range M. "norm": THC Alg. 3's t_p·l/sqrt(B) from
  // the block norms (clamps about a fraction p of the coordinates); "max":
  // end-to-end-utility §3.2.2's value range of the rotated block, max |R| over
  // workers (no clamp). The ps deployment takes THC's (ConfigError otherwise).
  std::string range = "norm";

  static ThcOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& node) const;
};

class Thc : public Compressor {
 public:
  explicit Thc(ThcOptions options);

  std::string name() const override { return "thc"; }
  Capabilities capabilities() const override;
  // Uplink (what a rank contributes): packed codes of the padded vector plus one
  // float32 norm per rotation block. n matters only through bitsFor(n).
  double bitsPerCoordinate(int64_t d, int n) const override;
  // ps: the owner's w-bit packed sums, w = downlinkBits(n) (Alg. 2 line 13),
  // no norms (they went round before); allreduce: the uplink's.
  double downlinkBitsPerCoordinate(int64_t d, int n) const override;
  Aggregated aggregate(const at::Tensor& x, Context& ctx) override;
  Payload encode(const at::Tensor& x, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override;
  // The quantiser's parameters and the table in use (ps); load refuses another's.
  void save(torch::serialize::OutputArchive& ar) const override;
  void load(torch::serialize::InputArchive& ar) override;

  const ThcOptions& options() const { return options_; }
  // g and b used with n workers, and the downlink width ceil(log2(n·g+1)) (ps).
  // bitsFor(n) is options().bits except under granularity_rule: paper.
  int granularityFor(int n) const;
  int bitsFor(int n) const;
  int downlinkBits(int n) const;
  // Payload bytes one of n workers sends for d coordinates (codes + norms).
  int64_t payloadBytes(int64_t d, int n = 1) const;
  // allreduce: field width on the wire (aggregationBits, or bits).
  int fieldBits() const { return options_.aggregationBits > 0 ? options_.aggregationBits : options_.bits; }

 private:
  // One worker's quantised rotated vector for given (global) block ranges
  // (allreduce deployment, step by step: the CPU path of range: max).
  struct Quantized {
    at::Tensor codes;   // int32 signed codes
    at::Tensor values;  // X_i: the quantised rotated vector, float32 [paddedDim]
    at::Tensor range;   // M per block, float32 [numBlocks]
  };
  RandomizedHadamard rotation(int64_t d) const;
  // Block norms of x (contiguous CPU float32), rejecting non-finite x (UserError).
  static at::Tensor blockNorms(const at::Tensor& x, const RandomizedHadamard& rht);
  // range: M per block (rangeOf the norms, or the block maxima with range: max).
  Quantized quantize(const at::Tensor& rotated, const at::Tensor& range, const RandomizedHadamard& rht,
                     uint64_t privateSeed) const;
  // Rotated-domain mean from n workers' int32 saturated code sums S.
  at::Tensor dequantizeSum(const at::Tensor& sums, const at::Tensor& range, const RandomizedHadamard& rht,
                           int n) const;
  // ps: THC's table for (b, g) = (bitsFor(n), granularityFor(n)), built once per (b, g).
  const thc::TableLookup& tableFor(int n);
  // T(0..2^b−1) for b bits and granularity g (the uniform table for the uniform variant).
  std::vector<int> tableValues(int b, int g) const;
  // ps, Alg. 2 lines 7–11: R = RHT(x) into rotated_, then its packed b-bit
  // table indices for `range` (compress/kernels/ThcTableKernels.h).
  at::Tensor rotateQuantizePs(const at::Tensor& x, const at::Tensor& range, const RandomizedHadamard& rht, int n,
                              Context& ctx);
  // ps: RHT⁻¹ of rotated_ (overwritten) into a float32 [d] tensor (`cache` reused when free).
  at::Tensor inverseOfRotated(const RandomizedHadamard& rht, uint64_t sharedSeed, at::Tensor& cache);
  Aggregated aggregatePs(const at::Tensor& x, Context& ctx);
  Aggregated aggregateAllReduce(const at::Tensor& x, Context& ctx);
  // THC Alg. 3, M = t_p · l / sqrt(B) per block (float32 [numBlocks]):
  // float(double(l) · rangeScale) with rangeScale = t_p / sqrt(B) in double.
  double rangeScale(const RandomizedHadamard& rht) const;
  at::Tensor rangeOf(const at::Tensor& norms, const RandomizedHadamard& rht) const;
  // range: max: the largest |R| of each block of the rotated vector (float32 [numBlocks]).
  static at::Tensor blockMaxima(const at::Tensor& rotated, const RandomizedHadamard& rht);
  // allreduce with range: max, after the rotation (Aggregated as aggregateAllReduce).
  Aggregated aggregateAllReduceMax(const at::Tensor& x, Context& ctx);
  bool maxRange() const { return options_.range == "max"; }

  // Collectives both paths share (ThcAggregate.cpp). Round 1 of Alg. 3: the
  // element-wise MAX over ranks of t (block norms, or block maxima with
  // range: max), in place. The saturating all-reduce of packed b-bit words
  // through the plan's collective (a ring when there is none): returns the
  // sums S; *saturated = the clip events of every rank's combines, summed;
  // *losses = what this rank's combines clipped per code (int32 [codes]),
  // undefined when nothing; S = Σ_i C_i − Σ_i losses_i exactly.
  static at::Tensor maxOverRanks(at::Tensor t, Context& ctx);
  static at::Tensor saturatingSum(const at::Tensor& words, int b, int64_t codes, Context& ctx, int64_t* saturated,
                                  at::Tensor* losses);
  static constexpr int kPsTag = 0x5443;  // psExchange uses this tag and the next

  // The device-generic path (compress/CodecPath.h): the same pipeline in ATen
  // operations on x's device (ThcGeneric.cpp: the codec pieces, encode and
  // decode; ThcGenericAggregate.cpp: both deployments' aggregate). The
  // rotation, the random signs and the SQ noise are the kernels' bits
  // (compress/kernels/HadamardGeneric.h, CounterRngGeneric.h), and the wire
  // formats are theirs, so either path decodes the other's payloads.
  Aggregated aggregatePsGeneric(const at::Tensor& x, Context& ctx);
  Aggregated aggregateAllReduceGeneric(const at::Tensor& x, Context& ctx);  // both range modes
  Payload encodeGeneric(const at::Tensor& x, Context& ctx);
  at::Tensor decodeGeneric(const Payload& p, int64_t d, Context& ctx);
  // Block norms of x (float32 [numBlocks], double accumulation, on x's device).
  static at::Tensor blockNormsGeneric(const at::Tensor& x, const RandomizedHadamard& rht);
  // allreduce: the signed codes (int32 [paddedDim]) of the rotated vector for
  // the ranges M, as quantize()'s (§3.2.2 with roundUniform's noise).
  at::Tensor quantizeGeneric(const at::Tensor& rotated, const at::Tensor& range, const RandomizedHadamard& rht,
                             uint64_t privateSeed) const;
  // dequantizeSum(): (s/n)·(M/L) per coordinate, float32 [paddedDim].
  at::Tensor dequantizeSumGeneric(const at::Tensor& sums, const at::Tensor& range, const RandomizedHadamard& rht,
                                  int n) const;
  // allreduce: signed codes to SaturatingPackedSum's words, and back (int32 codes).
  static at::Tensor packWordsGeneric(const at::Tensor& codes, int bits);
  static at::Tensor unpackWordsGeneric(const at::Tensor& words, int bits, int64_t n);
  // ps, Alg. 2 lines 8–10: the table indices (int64 [paddedDim]) of the
  // rotated vector, as thc::quantizeTablePack's codes.
  static at::Tensor tableCodesGeneric(const at::Tensor& rotated, const at::Tensor& range,
                                      const RandomizedHadamard& rht, const thc::TableLookup& table, uint64_t seed);
  // ps: X_i = T[z]·(M − m)/g + m (thc::dequantizeCodes), and the owners'
  // sums as (s/n)·(M − m)/g + m (thc::dequantizeSums), float32 [paddedDim].
  static at::Tensor tableValuesGeneric(const at::Tensor& codes, const at::Tensor& range,
                                       const RandomizedHadamard& rht, const thc::TableLookup& table);
  static at::Tensor sumValuesGeneric(const at::Tensor& sums, const at::Tensor& range, const RandomizedHadamard& rht,
                                     int n, int g);

  ThcOptions options_;
  double tp_;
  int64_t agreedNumel_ = -1;  // d confirmed equal on every rank (checkSameNumelAcrossRanks)
  // allreduce fast path: one rotation block, and output buffers reused while no
  // caller holds them (simd::reusableBuffer).
  std::vector<float> scratch_, ranges_;
  at::Tensor wordCache_, meanCache_, appliedCache_, normCache_;
  // ps: the rotated vector (paddedDim floats), reused for the decoded ones;
  // the table; the packed uplink codes.
  std::vector<float> rotated_;
  std::unique_ptr<thc::TableLookup> table_;
  at::Tensor codeCache_;
};

}  // namespace gradzip::compress
