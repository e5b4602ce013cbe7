// Shared plumbing of the point-to-point collectives (ring, tree, parameter
// server, ring all-gather): how a 1-D tensor is cut into per-rank chunks and
// pipelining segments, how a (collective, step, segment) triple becomes a unique
// message tag, and the byte views that let send/recv move any dtype (Gloo does
// not know int16, which saturatingAdd uses for b > 8).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace gradzip::comm {

// Large messages are pipelined in segments of this many bytes, so that receiving
// segment j+1 overlaps combining and forwarding segment j.
inline constexpr int64_t kDefaultSegmentBytes = int64_t{1} << 20;

// A half-open element range [offset, offset + length).
struct Span {
  int64_t offset = 0;
  int64_t length = 0;
};

// Splits [0, numel) into `parts` contiguous spans in order; the first
// numel % parts spans hold one element more. Spans may be empty.
std::vector<Span> evenSplit(int64_t numel, int parts);

// Splits `s` into consecutive segments of `maxElems` (>= 1) elements, the last
// one shorter; an empty span has no segments.
std::vector<Span> segmentsOf(Span s, int64_t maxElems);

// Elements per segment for `segmentBytes` and an element of `elemSize` bytes (>= 1).
int64_t segmentElems(int64_t segmentBytes, int64_t elemSize);

// t[s] as a 1-D uint8 view of its bytes; t must be 1-D and contiguous.
at::Tensor bytesOf(const at::Tensor& t, Span s);

// Message-tag spaces, one per collective, so messages of different collectives
// or steps never match each other's receives.
enum class TagSpace : int { Ring = 1, Tree = 2, ParameterServer = 3, AllGather = 4 };

// Tag = [space: 4 bits][step: 12 bits][segment mod 2^15]. Steps must be < 4096
// (tagStepLimit). Reusing a tag after 2^15 segments is safe because Gloo
// delivers messages with equal (peer, tag) in order.
int messageTag(TagSpace space, int step, int64_t segment);
inline constexpr int kTagStepLimit = 1 << 12;

// UserError unless `input` is a defined, 1-D, contiguous tensor; `who` names the
// collective in the message.
void checkCollectiveInput(const char* who, const at::Tensor& input);

}  // namespace gradzip::comm
