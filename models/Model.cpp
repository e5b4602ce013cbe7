// Implements models/Model.h: the default masked forward and parameter counting.
#include "models/Model.h"

#include "util/Error.h"

#include <fmt/ranges.h>

#include <unordered_set>

namespace gradzip::models {

const char* toString(ModelKind kind) {
  switch (kind) {
    case ModelKind::kClassification: return "classification";
    case ModelKind::kMaskedLm: return "masked_lm";
  }
  GZ_ASSERT(false, "unknown ModelKind {}", static_cast<int>(kind));
}

at::Tensor Model::forwardMasked(const at::Tensor& input, const at::Tensor& attentionMask) {
  GZ_CHECK(!attentionMask.defined(), "model '{}' ({}) takes no attention mask", name(), toString(kind()));
  return forward(input);
}

int64_t parameterCount(const torch::nn::Module& module) {
  // parameters() lists a tensor once per registration; dedupe by storage identity
  // (TensorImpl) so that a weight registered under two names is still counted once.
  std::unordered_set<const void*> seen;
  int64_t n = 0;
  for (const auto& p : module.parameters())
    if (seen.insert(p.unsafeGetTensorImpl()).second) n += p.numel();
  return n;
}

std::string shapeOf(const at::Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return fmt::format("[{}]", fmt::join(t.sizes(), ", "));
}

}  // namespace gradzip::models
