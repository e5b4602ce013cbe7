// Ring all-reduce over point-to-point send/recv: reduce-scatter then all-gather,
// 2(N-1) steps, each rank sending to (rank+1)%N and receiving from
// (rank-1+N)%N (flexible-communication paper Table I: 2(N-1)α + 2((N-1)/N)Mβ).
// Chunk k is reduced once, along the ring starting at rank k, and then passed
// around unchanged, so every rank ends with the same bytes even for float sums
// and the non-associative saturating add. Large chunks are pipelined in
// segments: a segment is forwarded as soon as it has been received and combined.
#pragma once

#include "comm/BufferPool.h"
#include "comm/Chunking.h"
#include "comm/Collective.h"

namespace gradzip::comm {

class RingAllReduce final : public Collective {
 public:
  // `segmentBytes` (>= 1) bounds every message; see kDefaultSegmentBytes.
  explicit RingAllReduce(Communicator& comm, int64_t segmentBytes = kDefaultSegmentBytes);
  std::string name() const override { return "ring"; }
  // Collective.h contract. The wire carries accumulators (r.accType), so a
  // widening reduction widens the traffic as well. The result and the scratch
  // space come from a BufferPool, reused once the caller drops the result.
  at::Tensor allReduce(const at::Tensor& input, const Reduction& r) override;

 private:
  Communicator& comm_;
  int64_t segmentBytes_;
  BufferPool pool_;
};

}  // namespace gradzip::comm
