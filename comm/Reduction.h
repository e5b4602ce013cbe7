// Element-wise reductions for gradzip's own collectives (comm/Collective.h).
// Gloo and NCCL only sum, min and max; compressed-domain aggregation needs more
// (DESIGN.md §4): integer sums in a wider type, the saturating b-bit add of the
// end-to-end-utility paper §3.2.2, and THC's table lookup-and-add (THC Alg. 2).
//
// A reduction works in two stages so that the same object serves ring, tree and
// parameter-server algorithms:
//   acc  = lift(raw)        turns one rank's wire input into an accumulator
//                           (identity, widening, or table lookup);
//   combine(acc, other)     folds another accumulator into acc, in place.
// The result of a collective is an accumulator (dtype accType(raw dtype)).
// combine must be commutative and associative up to float rounding.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>

namespace gradzip::comm {

class Reduction {
 public:
  virtual ~Reduction() = default;
  virtual std::string name() const = 0;
  // dtype of the accumulator for a raw input of dtype `in`; throws on a dtype it
  // cannot reduce (naming both).
  virtual at::ScalarType accType(at::ScalarType in) const = 0;
  // A fresh accumulator (never aliases raw).
  virtual at::Tensor lift(const at::Tensor& raw) const = 0;
  // Writes lift(raw) into `out`: a contiguous tensor of dtype accType(raw dtype)
  // and raw's numel that does not overlap raw. Collectives use it to lift into
  // buffers they reuse across calls; override it to avoid the temporary.
  virtual void liftInto(const at::Tensor& raw, at::Tensor& out) const { out.copy_(lift(raw)); }
  // acc <- acc (+) other; other has acc's dtype and numel (UserError otherwise).
  // Both are contiguous; acc may be a slice of a larger accumulator.
  virtual void combine(at::Tensor& acc, const at::Tensor& other) const = 0;
  // True when combine is exactly element-wise + in the accumulator dtype, so the
  // engine's Sum all-reduce of lifted accumulators computes the same reduction
  // (comm/EngineAllReduce.h accepts only these).
  virtual bool isPlainSum() const { return false; }
};

// Floating-point sum in the input dtype (float, double, half, bfloat16).
std::shared_ptr<Reduction> floatSum();
// Integer sum accumulated in `wide` (int32 or int64) from any integer input.
std::shared_ptr<Reduction> wideIntSum(at::ScalarType wide = at::kLong);
// Sat(x, y) = min(2^(b-1)-1, max(-2^(b-1)+1, x+y)) on signed codes held in
// int8 (b <= 8) or int16 (b <= 16); beyond-throughput paper §3.2.2. It never
// wraps: the intermediate sum is formed in int32. 2 <= bits <= 16. lift clamps
// its input into [-(2^(b-1)-1), 2^(b-1)-1], so every result lies in that range.
// Sat is not associative: a collective's result depends on its combine order
// (which each algorithm fixes, so all ranks still agree bit for bit).
std::shared_ptr<Reduction> saturatingAdd(int bits);
// THC Alg. 2 aggregation: acc = sum over ranks of table[code]; codes are uint8
// indices into `table` (an int64 1-D tensor of at most 256 entries whose values
// fit `wide`), accumulated in `wide` (int32 or int64). A code >= table.numel()
// is a UserError.
std::shared_ptr<Reduction> tableLookupSum(at::Tensor table, at::ScalarType wide = at::kInt);

}  // namespace gradzip::comm
