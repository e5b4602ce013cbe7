// Implements compress/ErrorFeedback.h.
#include "compress/ErrorFeedback.h"

#include "util/Error.h"

#include <utility>

namespace gradzip::compress {

ErrorFeedback::ErrorFeedback(std::unique_ptr<Compressor> inner) : inner_(std::move(inner)) {
  GZ_ASSERT(inner_ != nullptr, "ErrorFeedback needs an inner compressor");
}

at::Tensor ErrorFeedback::errorFed(const at::Tensor& grad) {
  checkGradient(grad, name());
  if (!residual_.defined()) return grad.clone();
  GZ_CHECK(residual_.numel() == grad.numel(),
           "{}: bucket size changed from {} to {} coordinates; a compressor serves one bucket", name(),
           residual_.numel(), grad.numel());
  // A residual loaded from a checkpoint lives on the CPU until the first gradient says where the bucket is.
  if (residual_.device() != grad.device()) residual_ = residual_.to(grad.device());
  return grad + residual_;
}

Aggregated ErrorFeedback::aggregate(const at::Tensor& grad, Context& ctx) {
  const at::Tensor x = errorFed(grad);           // 1. add the residual (Eq. 2a)
  Aggregated r = inner_->aggregate(x, ctx);      // 2. compress and aggregate
  residual_ = x - r.localApplied;                // 3. keep what was lost (Eq. 2b)
  return r;
}

Payload ErrorFeedback::encode(const at::Tensor& grad, Context& ctx) {
  const at::Tensor x = errorFed(grad);
  Payload p = inner_->encode(x, ctx);
  residual_ = x - inner_->decode(p, x.numel(), ctx);
  return p;
}

void ErrorFeedback::save(torch::serialize::OutputArchive& ar) const {
  ar.write("residual", residual_.defined() ? residual_ : at::empty({0}, at::kFloat));
  torch::serialize::OutputArchive inner;
  inner_->save(inner);
  ar.write("inner", inner);
}

void ErrorFeedback::load(torch::serialize::InputArchive& ar) {
  at::Tensor e;
  ar.read("residual", e);
  GZ_CHECK(e.dim() == 1 && e.scalar_type() == at::kFloat, "{}: checkpointed residual is not a float vector", name());
  residual_ = e.numel() == 0 ? at::Tensor() : e.contiguous();
  torch::serialize::InputArchive inner;
  ar.read("inner", inner);
  inner_->load(inner);
}

at::Tensor ErrorFeedback::takeResidual() { return std::exchange(residual_, at::Tensor()); }

bool ErrorFeedback::addResidual(const at::Tensor& e) {
  if (!e.defined()) return true;
  GZ_CHECK(e.dim() == 1 && e.scalar_type() == at::kFloat, "{}: a residual must be a float vector", name());
  GZ_CHECK(!residual_.defined() || residual_.numel() == e.numel(),
           "{}: residual of {} coordinates added to one of {}", name(), e.numel(), residual_.numel());
  residual_ = residual_.defined() ? residual_ + e.to(residual_.device()) : e.clone();
  return true;
}

double ErrorFeedback::residualNorm() const {
  return residual_.defined() ? residual_.norm().item<double>() : 0.0;
}

}  // namespace gradzip::compress
