// FloatCast: the uncompressed baselines fp32, fp16 and bf16 (end-to-end-utility
// paper §2 and §4: FP16 aggregation is the baseline every scheme must beat, FP32
// is always shown too). Each rank casts its gradient to the wire type and the
// ranks all-reduce in that type; half types divide by n BEFORE the cast so the
// sum over ranks cannot overflow (as PyTorch DDP's fp16_compress_hook does).
#pragma once

#include "compress/Compressor.h"

namespace gradzip::compress {

class FloatCast final : public Compressor {
 public:
  // wire is at::kFloat, at::kHalf or at::kBFloat16 (anything else: UserError).
  explicit FloatCast(at::ScalarType wire);

  std::string name() const override;
  Capabilities capabilities() const override;
  // 32, 16 or 16: the wire type's width; no header.
  double bitsPerCoordinate(int64_t d, int n) const override;

  // fp32: mean = AllReduce(x) / n. Half types: mean = float(AllReduce(half(x / n))).
  // localApplied = what this rank contributed, decoded: float(half(x/n)) * n.
  Aggregated aggregate(const at::Tensor& x, Context& ctx) override;
  Payload encode(const at::Tensor& x, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override;

 private:
  at::Tensor castChecked(const at::Tensor& x, float div, at::Tensor& cache) const;
  at::Tensor widen(const at::Tensor& wire, float mul, at::Tensor& cache) const;
  Aggregated aggregateGeneric(const at::Tensor& x, Context& ctx);

  at::ScalarType wire_;
  int64_t agreedNumel_ = -1;
  // Output buffers reused across calls while no caller still holds them
  // (simd::reusableBuffer): fresh d-sized tensors every step cost page faults.
  at::Tensor wireCache_, meanCache_, appliedCache_;  // d confirmed equal on every rank (checkSameNumelAcrossRanks)
};

}  // namespace gradzip::compress
