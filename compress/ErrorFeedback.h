// ErrorFeedback: the decorator that keeps what compression lost and adds it to
// the next step's gradient (Seide et al. 2014; Karimireddy et al. 2019; the
// flexible-communication paper's Eq. 2a-2b). It reads like the formula:
//   x = grad + e;  r = inner.aggregate(x);  e = x - r.localApplied.
// Over T steps Σ_t localApplied_t + e_T = Σ_t grad_t (up to float rounding):
// nothing is ever dropped, only delayed. The residual is checkpointed.
#pragma once

#include "compress/Compressor.h"

#include <memory>

namespace gradzip::compress {

class ErrorFeedback final : public Compressor {
 public:
  explicit ErrorFeedback(std::unique_ptr<Compressor> inner);

  // The inner compressor's name, capabilities and bits: the residual never
  // travels.
  std::string name() const override { return inner_->name(); }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  double bitsPerCoordinate(int64_t d, int n) const override { return inner_->bitsPerCoordinate(d, n); }
  double downlinkBitsPerCoordinate(int64_t d, int n) const override {
    return inner_->downlinkBitsPerCoordinate(d, n);
  }

  Aggregated aggregate(const at::Tensor& grad, Context& ctx) override;
  // Single-worker codec with the same bookkeeping: encode compresses grad + e
  // and sets e = (grad + e) - inner.decode(payload).
  Payload encode(const at::Tensor& grad, Context& ctx) override;
  at::Tensor decode(const Payload& p, int64_t d, Context& ctx) override { return inner_->decode(p, d, ctx); }

  // Writes the residual and, in a nested archive "inner", the inner state.
  void save(torch::serialize::OutputArchive& ar) const override;
  void load(torch::serialize::InputArchive& ar) override;

  // The current residual e (undefined before the first step) and ||e||₂ (0 then).
  const at::Tensor& residual() const override { return residual_; }
  // Moving a residual between compressors (sync/GradSync.h does it when a
  // bucket switches plans, so a switch delays nothing more and drops nothing):
  // takeResidual returns e and leaves none; addResidual adds e to this one's.
  at::Tensor takeResidual() override;
  bool addResidual(const at::Tensor& e) override;
  double residualNorm() const override;
  void setCodecPath(CodecPath p) override {
    Compressor::setCodecPath(p);
    inner_->setCodecPath(p);
  }
  Compressor& inner() { return *inner_; }

 private:
  // grad + e, creating e = 0 on first use; a changed bucket size is a UserError.
  at::Tensor errorFed(const at::Tensor& grad);

  std::unique_ptr<Compressor> inner_;
  at::Tensor residual_;
};

}  // namespace gradzip::compress
