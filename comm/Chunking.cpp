// Implements comm/Chunking.h.
#include "comm/Chunking.h"

#include "util/Error.h"

#include <algorithm>

namespace gradzip::comm {

std::vector<Span> evenSplit(int64_t numel, int parts) {
  GZ_ASSERT(parts >= 1 && numel >= 0, "evenSplit({}, {})", numel, parts);
  std::vector<Span> spans(static_cast<size_t>(parts));
  const int64_t base = numel / parts, extra = numel % parts;
  int64_t offset = 0;
  for (int i = 0; i < parts; ++i) {
    const int64_t len = base + (i < extra ? 1 : 0);
    spans[static_cast<size_t>(i)] = Span{offset, len};
    offset += len;
  }
  return spans;
}

std::vector<Span> segmentsOf(Span s, int64_t maxElems) {
  GZ_ASSERT(maxElems >= 1, "segment of {} elements", maxElems);
  std::vector<Span> segs;
  for (int64_t off = 0; off < s.length; off += maxElems)
    segs.push_back(Span{s.offset + off, std::min(maxElems, s.length - off)});
  return segs;
}

int64_t segmentElems(int64_t segmentBytes, int64_t elemSize) {
  GZ_CHECK(segmentBytes >= 1, "segment size must be at least 1 byte, got {}", segmentBytes);
  return std::max<int64_t>(1, segmentBytes / std::max<int64_t>(1, elemSize));
}

at::Tensor bytesOf(const at::Tensor& t, Span s) {
  return t.slice(0, s.offset, s.offset + s.length).view(at::kByte);
}

int messageTag(TagSpace space, int step, int64_t segment) {
  GZ_ASSERT(step >= 0 && step < kTagStepLimit, "tag step {} out of range", step);
  return (static_cast<int>(space) << 27) | (step << 15) | static_cast<int>(segment & 0x7fff);
}

void checkCollectiveInput(const char* who, const at::Tensor& input) {
  GZ_CHECK(input.defined(), "{}: undefined input tensor", who);
  GZ_CHECK(input.dim() == 1, "{}: input must be 1-D (flatten it first), got shape {}", who, c10::str(input.sizes()));
  GZ_CHECK(input.is_contiguous(), "{}: input must be contiguous", who);
}

}  // namespace gradzip::comm
