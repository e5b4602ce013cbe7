// A small cache of tensors that the point-to-point collectives reuse across
// calls. Fresh multi-megabyte allocations cost more than the collective itself
// on CPU: every page is faulted in on first touch, several times the cost of
// copying into memory already mapped (experiments/results/collectives.md,
// "Buffer reuse"), while c10d's all-reduce works in place. A buffer handed out is reused only once nothing but the pool refers
// to its storage (the caller dropped every tensor and view of it), so results
// returned to callers are never overwritten behind their back.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <mutex>
#include <vector>

namespace gradzip::comm {

class BufferPool {
 public:
  // Keeps at most `maxBuffers` buffers alive between calls.
  explicit BufferPool(size_t maxBuffers = 8) : maxBuffers_(maxBuffers) {}

  // A contiguous 1-D tensor of `numel` elements with `opts` (dtype, device),
  // uninitialised; it aliases a pooled buffer that nothing else references, or
  // fresh memory (pooled if there is room). Thread-safe.
  at::Tensor acquire(int64_t numel, const at::TensorOptions& opts);

  // Bytes currently held by the pool.
  int64_t heldBytes() const;

 private:
  size_t maxBuffers_;
  mutable std::mutex mu_;
  std::vector<at::Tensor> buffers_;  // 1-D uint8 tensors owning their storage
};

}  // namespace gradzip::comm
