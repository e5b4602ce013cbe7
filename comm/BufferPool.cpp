// Implements comm/BufferPool.h. Buffers are raw bytes; a request takes the
// smallest free buffer that fits and is at most twice as large (so a small
// request does not pin a huge buffer), else adds a buffer while there is room,
// else replaces a free buffer that does not fit, else allocates unpooled.
#include "comm/BufferPool.h"

namespace gradzip::comm {
namespace {
// Only the pool's own tensor refers to the storage.
bool isFree(const at::Tensor& buf) { return buf.storage().use_count() == 1; }
}  // namespace

at::Tensor BufferPool::acquire(int64_t numel, const at::TensorOptions& opts) {
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(c10::typeMetaToScalarType(opts.dtype())));
  if (bytes == 0 || maxBuffers_ == 0) return at::empty({numel}, opts);
  auto view = [&](const at::Tensor& buf) {
    return buf.slice(0, 0, bytes).view(c10::typeMetaToScalarType(opts.dtype()));
  };
  std::lock_guard<std::mutex> lock(mu_);
  at::Tensor* best = nullptr;
  at::Tensor* spare = nullptr;
  for (auto& buf : buffers_) {
    if (buf.device() != opts.device() || !isFree(buf)) continue;
    const int64_t cap = buf.numel();
    if (cap >= bytes && cap <= 2 * bytes) {
      if (!best || cap < best->numel()) best = &buf;
    } else if (!spare) {
      spare = &buf;
    }
  }
  if (best) return view(*best);
  at::Tensor fresh = at::empty({bytes}, opts.dtype(at::kByte));
  if (buffers_.size() < maxBuffers_) buffers_.push_back(fresh);
  else if (spare) *spare = fresh;
  return view(fresh);
}

int64_t BufferPool::heldBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t total = 0;
  for (const auto& b : buffers_) total += b.numel();
  return total;
}

}  // namespace gradzip::comm
