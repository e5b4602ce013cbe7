// Tree all-reduce over point-to-point send/recv: reduce up a binary tree to rank
// 0, then broadcast the result down the same tree (flexible-communication paper
// Table I: 2α log N + 2 log N Mβ). Ranks form a heap: the parent of r is
// (r-1)/2, its children 2r+1 and 2r+2. Every node combines its own value, then
// its children's in child order, so the root's result is deterministic and the
// broadcast gives every rank the same bytes. Both phases are pipelined in
// segments.
#pragma once

#include "comm/BufferPool.h"
#include "comm/Chunking.h"
#include "comm/Collective.h"

namespace gradzip::comm {

class TreeAllReduce final : public Collective {
 public:
  // `segmentBytes` (>= 1) bounds every message; see kDefaultSegmentBytes.
  explicit TreeAllReduce(Communicator& comm, int64_t segmentBytes = kDefaultSegmentBytes);
  std::string name() const override { return "tree"; }
  // Collective.h contract; the wire carries accumulators (r.accType). Result
  // and scratch come from a BufferPool.
  at::Tensor allReduce(const at::Tensor& input, const Reduction& r) override;

 private:
  Communicator& comm_;
  int64_t segmentBytes_;
  BufferPool pool_;
};

}  // namespace gradzip::comm
