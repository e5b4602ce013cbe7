// Implements the free functions of comm/Collective.h: the collective factory and
// the ring all-gather. The all-gather runs N-1 steps; at step s rank r sends row
// (r - s) mod N to the next rank and receives row (r - s - 1) mod N from the
// previous one, straight into the output. A received segment is forwarded at
// once (the row received at step s is the row sent at step s+1), and every
// receive is posted up front, so large rows stream around the ring.
#include "comm/Collective.h"

#include "comm/Chunking.h"
#include "comm/EngineAllReduce.h"
#include "comm/ParameterServer.h"
#include "comm/RingAllReduce.h"
#include "comm/TreeAllReduce.h"
#include "util/Error.h"

#include <fmt/ranges.h>

namespace gradzip::comm {
namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

at::Tensor ringAllGather(Communicator& comm, const at::Tensor& input) {
  checkCollectiveInput("ring all-gather", input);
  const int n = comm.size(), rank = comm.rank();
  const int64_t numel = input.numel();
  at::Tensor out = at::empty({n, numel}, input.options());
  out[rank].copy_(input);
  if (n == 1 || numel == 0) return out;
  GZ_CHECK(n - 1 < kTagStepLimit, "ring all-gather: world size {} is too large", n);

  const int next = mod(rank + 1, n), prev = mod(rank - 1, n);
  const std::vector<Span> segs = segmentsOf(Span{0, numel}, segmentElems(kDefaultSegmentBytes, input.element_size()));
  auto tag = [](int step, size_t j) { return messageTag(TagSpace::AllGather, step, static_cast<int64_t>(j)); };
  auto row = [&](int r) { return out[mod(r, n)]; };

  std::vector<std::vector<Work>> recvs(static_cast<size_t>(n - 1), std::vector<Work>(segs.size()));
  for (int s = 0; s < n - 1; ++s) {
    at::Tensor dstRow = row(rank - s - 1);
    for (size_t j = 0; j < segs.size(); ++j) {
      at::Tensor dst = bytesOf(dstRow, segs[j]);
      recvs[static_cast<size_t>(s)][j] = comm.recv(dst, prev, tag(s, j));
    }
  }
  std::vector<Work> sends;
  for (size_t j = 0; j < segs.size(); ++j) sends.push_back(comm.send(bytesOf(row(rank), segs[j]), next, tag(0, j)));
  for (int s = 0; s < n - 1; ++s) {
    for (size_t j = 0; j < segs.size(); ++j) {
      recvs[static_cast<size_t>(s)][j].wait();
      if (s + 1 < n - 1) sends.push_back(comm.send(bytesOf(row(rank - s - 1), segs[j]), next, tag(s + 1, j)));
    }
  }
  waitAll(sends);
  return out;
}

std::vector<std::string> collectiveNames() { return {"ring", "tree", "ps", "engine"}; }

std::unique_ptr<Collective> makeCollective(const std::string& name, Communicator& comm) {
  if (name == "ring") return std::make_unique<RingAllReduce>(comm);
  if (name == "tree") return std::make_unique<TreeAllReduce>(comm);
  if (name == "ps") return std::make_unique<ParameterServer>(comm);
  if (name == "engine") return std::make_unique<EngineAllReduce>(comm);
  throw UserError(fmt::format("unknown collective '{}' (known: {})", name, fmt::join(collectiveNames(), ", ")));
}

}  // namespace gradzip::comm
