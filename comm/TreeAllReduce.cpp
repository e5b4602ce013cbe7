// Implements comm/TreeAllReduce.h. Step 0 tags the reduction (child -> parent),
// step 1 the broadcast (parent -> child). A node forwards segment j up as soon
// as it has combined its children's segment j, and posts the receive of the
// broadcast's segment j right after, so the broadcast never waits on a
// rendezvous.
#include "comm/TreeAllReduce.h"

#include "util/Error.h"

namespace gradzip::comm {

TreeAllReduce::TreeAllReduce(Communicator& comm, int64_t segmentBytes) : comm_(comm), segmentBytes_(segmentBytes) {
  GZ_CHECK(segmentBytes >= 1, "tree all-reduce: segment size must be at least 1 byte, got {}", segmentBytes);
}

at::Tensor TreeAllReduce::allReduce(const at::Tensor& input, const Reduction& r) {
  checkCollectiveInput("tree all-reduce", input);
  const int n = comm_.size();
  const int64_t numel = input.numel();
  if (n == 1 || numel == 0) return r.lift(input);
  at::Tensor acc = pool_.acquire(numel, input.options().dtype(r.accType(input.scalar_type())));

  const int rank = comm_.rank();
  const int parent = rank == 0 ? -1 : (rank - 1) / 2;
  std::vector<int> children;
  for (int c : {2 * rank + 1, 2 * rank + 2})
    if (c < n) children.push_back(c);
  const std::vector<Span> segs = segmentsOf(Span{0, numel}, segmentElems(segmentBytes_, acc.element_size()));
  auto tag = [](int step, size_t j) { return messageTag(TagSpace::Tree, step, static_cast<int64_t>(j)); };

  // Children's partial results, one scratch row per child.
  const auto numChildren = static_cast<int64_t>(children.size());
  at::Tensor scratch = pool_.acquire(numChildren * numel, acc.options()).view({numChildren, numel});
  std::vector<std::vector<Work>> fromChild(children.size(), std::vector<Work>(segs.size()));
  for (size_t k = 0; k < children.size(); ++k) {
    at::Tensor row = scratch[static_cast<int64_t>(k)];
    for (size_t j = 0; j < segs.size(); ++j) {
      at::Tensor dst = bytesOf(row, segs[j]);
      fromChild[k][j] = comm_.recv(dst, children[k], tag(0, j));
    }
  }

  std::vector<Work> sends;
  std::vector<Work> fromParent(segs.size());
  auto sendDown = [&](size_t j) {
    for (int c : children) sends.push_back(comm_.send(bytesOf(acc, segs[j]), c, tag(1, j)));
  };
  for (size_t j = 0; j < segs.size(); ++j) {
    // Lift segment by segment: overlaps communication, keeps the combine in cache.
    at::Tensor mine = acc.slice(0, segs[j].offset, segs[j].offset + segs[j].length);
    r.liftInto(input.slice(0, segs[j].offset, segs[j].offset + segs[j].length), mine);
    for (size_t k = 0; k < children.size(); ++k) {
      fromChild[k][j].wait();
      r.combine(mine, scratch[static_cast<int64_t>(k)].slice(0, segs[j].offset, segs[j].offset + segs[j].length));
    }
    if (parent < 0) {
      sendDown(j);  // the root's sum is final
    } else {
      sends.push_back(comm_.send(bytesOf(acc, segs[j]), parent, tag(0, j)));
      // The parent's broadcast of segment j depends on the send above having
      // arrived, so receiving into the same bytes cannot overtake it.
      at::Tensor dst = bytesOf(acc, segs[j]);
      fromParent[j] = comm_.recv(dst, parent, tag(1, j));
    }
  }
  if (parent >= 0) {
    for (size_t j = 0; j < segs.size(); ++j) {
      fromParent[j].wait();
      sendDown(j);
    }
  }
  waitAll(sends);
  return acc;
}

}  // namespace gradzip::comm
