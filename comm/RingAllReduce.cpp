// Implements comm/RingAllReduce.h.
//
// Steps s = 0 .. 2(N-1)-1 share one schedule: rank r sends chunk (r - s) mod N
// and receives chunk (r - s - 1) mod N. During the reduce-scatter (s < N-1) the
// received chunk lands in a scratch buffer and is combined into the
// accumulator; after it, rank r holds the finished chunk (r + 1) mod N. During
// the all-gather (s >= N-1) received chunks land directly in the accumulator.
// Every chunk is lifted exactly once: chunk r before its step-0 send, every
// other chunk just before its reduce-scatter combine.
// Because the chunk received at step s is the chunk sent at step s+1, each
// segment is forwarded right after it is processed, which pipelines the ring.
// Receives are posted ahead (Gloo sends only once the peer's receive is posted):
// all all-gather receives up front, reduce-scatter receives two steps ahead into
// two alternating scratch buffers.
#include "comm/RingAllReduce.h"

#include "util/Error.h"

#include <algorithm>

namespace gradzip::comm {
namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

RingAllReduce::RingAllReduce(Communicator& comm, int64_t segmentBytes) : comm_(comm), segmentBytes_(segmentBytes) {
  GZ_CHECK(segmentBytes >= 1, "ring all-reduce: segment size must be at least 1 byte, got {}", segmentBytes);
}

at::Tensor RingAllReduce::allReduce(const at::Tensor& input, const Reduction& r) {
  checkCollectiveInput("ring all-reduce", input);
  const int n = comm_.size();
  const int64_t numel = input.numel();
  if (n == 1 || numel == 0) return r.lift(input);
  at::Tensor acc = pool_.acquire(numel, input.options().dtype(r.accType(input.scalar_type())));
  GZ_CHECK(2 * (n - 1) < kTagStepLimit, "ring all-reduce: world size {} is too large", n);

  const int rank = comm_.rank(), next = mod(rank + 1, n), prev = mod(rank - 1, n);
  const int rsSteps = n - 1, steps = 2 * (n - 1);
  const std::vector<Span> chunks = evenSplit(numel, n);
  // Chunks of 512 KiB and more get at least two segments (as in Gloo's ring),
  // so their transfer overlaps the combine; smaller ones stay whole, where the
  // per-message cost outweighs the overlap.
  int64_t segElems = segmentElems(segmentBytes_, acc.element_size());
  if (chunks[0].length * acc.element_size() >= kDefaultSegmentBytes / 2)
    segElems = std::min(segElems, (chunks[0].length + 1) / 2);
  std::vector<std::vector<Span>> segs(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) segs[static_cast<size_t>(c)] = segmentsOf(chunks[static_cast<size_t>(c)], segElems);
  auto sendChunk = [&](int s) { return mod(rank - s, n); };
  auto recvChunk = [&](int s) { return mod(rank - s - 1, n); };
  auto segsOfStep = [&](int s) -> const std::vector<Span>& { return segs[static_cast<size_t>(recvChunk(s))]; };

  // Reduce-scatter step s receives into scratch[s % 2], at the segment's offset
  // within its chunk.
  at::Tensor scratch = pool_.acquire(2 * chunks[0].length, acc.options()).view({2, chunks[0].length});
  auto scratchSeg = [&](int s, const Span& seg) {
    const int64_t off = seg.offset - chunks[static_cast<size_t>(recvChunk(s))].offset;
    return scratch[s % 2].slice(0, off, off + seg.length);
  };

  std::vector<std::vector<Work>> recvs(static_cast<size_t>(steps));
  std::vector<Work> sends;
  auto postRecv = [&](int s, size_t j) {
    const Span& seg = segsOfStep(s)[j];
    at::Tensor dst = s < rsSteps ? scratchSeg(s, seg).view(at::kByte) : bytesOf(acc, seg);
    recvs[static_cast<size_t>(s)][j] = comm_.recv(dst, prev, messageTag(TagSpace::Ring, s, static_cast<int64_t>(j)));
  };
  // Lifting is done per segment just before the segment is first needed, so
  // it overlaps communication and the combine finds it in cache.
  auto liftSegment = [&](const Span& seg) {
    at::Tensor dst = acc.slice(0, seg.offset, seg.offset + seg.length);
    r.liftInto(input.slice(0, seg.offset, seg.offset + seg.length), dst);
  };
  auto postSend = [&](int s, size_t j) {
    const Span& seg = segs[static_cast<size_t>(sendChunk(s))][j];
    sends.push_back(comm_.send(bytesOf(acc, seg), next, messageTag(TagSpace::Ring, s, static_cast<int64_t>(j))));
  };

  for (int s = 0; s < steps; ++s) recvs[static_cast<size_t>(s)].resize(segsOfStep(s).size());
  for (int s = rsSteps; s < steps; ++s)
    for (size_t j = 0; j < segsOfStep(s).size(); ++j) postRecv(s, j);
  for (int s = 0; s < std::min(2, rsSteps); ++s)
    for (size_t j = 0; j < segsOfStep(s).size(); ++j) postRecv(s, j);
  for (size_t j = 0; j < segs[static_cast<size_t>(sendChunk(0))].size(); ++j) {
    liftSegment(segs[static_cast<size_t>(sendChunk(0))][j]);
    postSend(0, j);
  }

  for (int s = 0; s < steps; ++s) {
    const auto& stepSegs = segsOfStep(s);
    const bool reduce = s < rsSteps;
    for (size_t j = 0; j < stepSegs.size(); ++j) {
      recvs[static_cast<size_t>(s)][j].wait();
      if (reduce) {
        liftSegment(stepSegs[j]);
        at::Tensor dst = acc.slice(0, stepSegs[j].offset, stepSegs[j].offset + stepSegs[j].length);
        r.combine(dst, scratchSeg(s, stepSegs[j]));
        // This scratch segment is free again: reuse it two steps ahead. (A later
        // chunk may be one element longer; that element lies past every
        // segment of this step, so nothing still pending is overwritten.)
        if (s + 2 < rsSteps && j < segsOfStep(s + 2).size()) postRecv(s + 2, j);
      }
      if (s + 1 < steps) postSend(s + 1, j);
    }
    if (reduce && s + 2 < rsSteps)
      for (size_t j = stepSegs.size(); j < segsOfStep(s + 2).size(); ++j) postRecv(s + 2, j);
  }
  waitAll(sends);
  return acc;
}

}  // namespace gradzip::comm
