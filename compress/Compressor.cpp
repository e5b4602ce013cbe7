// Out-of-line helpers of compress/Compressor.h: seeds and argument checks.
#include "compress/Compressor.h"

#include "util/Error.h"

namespace gradzip::compress {
namespace {
// splitmix64 finaliser: a cheap, well-mixed hash for deriving seeds.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t Context::sharedSeed() const {
  return mix(mix(mix(seed) ^ static_cast<uint64_t>(bucket)) ^ static_cast<uint64_t>(step));
}

uint64_t Context::privateSeed() const { return mix(sharedSeed() ^ (0x5bd1e995ULL * (comm.rank() + 1))); }

int64_t Payload::bytes() const {
  int64_t b = 0;
  for (const auto& t : tensors) b += static_cast<int64_t>(t.numel()) * t.element_size();
  return b;
}

void checkGradient(const at::Tensor& x, const std::string& who) {
  GZ_CHECK(x.defined(), "{}: undefined gradient tensor", who);
  GZ_CHECK(x.dim() == 1, "{}: expected a 1-D (flattened) gradient, got {} dimensions", who, x.dim());
  GZ_CHECK(x.scalar_type() == at::kFloat, "{}: expected float32 gradients, got {}", who,
           c10::toString(x.scalar_type()));
  GZ_CHECK(x.is_contiguous(), "{}: gradient must be contiguous", who);
  GZ_CHECK(x.numel() == 0 || at::isfinite(x).all().item<bool>(),
           "{}: gradient contains NaN or Inf; refusing to compress (see trainer.nan_policy)", who);
}

}  // namespace gradzip::compress
