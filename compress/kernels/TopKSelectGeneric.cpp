// Implements compress/kernels/TopKSelectGeneric.h with ATen operations only,
// so it runs unchanged on CUDA tensors. Integer keys make every comparison
// exact: the selection cannot depend on how a device orders floats.
#include "compress/kernels/TopKSelectGeneric.h"

#include "util/Error.h"

#include <algorithm>

namespace gradzip::compress {

at::Tensor largestKeys(const at::Tensor& keys, int64_t k) {
  GZ_CHECK(keys.dim() == 1, "largestKeys: needs a 1-D tensor");
  const int64_t n = keys.numel();
  k = std::clamp<int64_t>(k, 0, n);
  const auto options = keys.options().dtype(at::kLong);
  if (k == n) return at::arange(n, options);
  if (k == 0) return at::empty({0}, options);
  // T, the k-th largest key (unsorted top-k: only its minimum is needed).
  const at::Tensor t = std::get<0>(at::topk(keys, k, 0, /*largest=*/true, /*sorted=*/false)).min();
  const at::Tensor above = keys.gt(t);
  const at::Tensor equal = keys.eq(t);
  // The first (k − #above) keys equal to T, in index order.
  const at::Tensor ties = equal.logical_and(equal.cumsum(0).le(above.sum().neg().add(k)));
  return at::nonzero(above.logical_or(ties)).view({-1});
}

at::Tensor largestMagnitudesGeneric(const at::Tensor& x, int64_t k) {
  GZ_CHECK(x.scalar_type() == at::kFloat && x.dim() == 1, "largestMagnitudesGeneric: needs a 1-D float tensor");
  GZ_CHECK(x.numel() < (int64_t{1} << 31), "largestMagnitudesGeneric: {} elements exceed int32 indices", x.numel());
  // The kernel's keys: bits with the sign cleared, below 2^31, so int32 orders them.
  const at::Tensor keys = x.contiguous().view(at::kInt).bitwise_and(0x7FFFFFFF);
  return largestKeys(keys, k).to(at::kInt);
}

at::Tensor orderKeys(const at::Tensor& s) {
  GZ_CHECK(s.dim() == 1, "orderKeys: needs a 1-D tensor");
  const at::Tensor c = s.contiguous();
  at::Tensor u;
  int64_t sign;
  switch (c.scalar_type()) {
    case at::kFloat:
      u = c.view(at::kInt).to(at::kLong).bitwise_and(int64_t{0xFFFFFFFF});
      sign = int64_t{1} << 31;
      break;
    case at::kHalf:
    case at::kBFloat16:
      u = c.view(at::kShort).to(at::kLong).bitwise_and(int64_t{0xFFFF});
      sign = int64_t{1} << 15;
      break;
    default: GZ_CHECK(false, "orderKeys: unexpected type {}", c10::toString(c.scalar_type()));
  }
  const int64_t all = 2 * sign - 1;
  u = at::where(u.eq(sign), at::zeros_like(u), u);  // -0 onto +0
  // Negative: all bits flipped (a larger magnitude, a smaller key); positive: the sign bit set.
  return at::where(u.ge(sign), u.bitwise_xor(all), u.bitwise_or(sign));
}

}  // namespace gradzip::compress
