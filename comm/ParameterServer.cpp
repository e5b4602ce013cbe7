// Implements comm/ParameterServer.h. Step 0 tags the uplink (raw shards to their
// server), step 1 the downlink (reduced shards back). All receives are posted
// before any send, so no rank waits on a rendezvous.
#include "comm/ParameterServer.h"

#include "comm/Chunking.h"
#include "util/Error.h"

namespace gradzip::comm {

ParameterServer::ParameterServer(Communicator& comm) : comm_(comm) {}

at::Tensor ParameterServer::allReduce(const at::Tensor& input, const Reduction& r) {
  checkCollectiveInput("parameter-server all-reduce", input);
  const int n = comm_.size();
  const int64_t numel = input.numel();
  if (n == 1 || numel == 0) return r.lift(input);

  const int rank = comm_.rank();
  const at::ScalarType accType = r.accType(input.scalar_type());
  const std::vector<Span> shards = evenSplit(numel, n);
  const Span own = shards[static_cast<size_t>(rank)];
  const int upTag = messageTag(TagSpace::ParameterServer, 0, 0);
  const int downTag = messageTag(TagSpace::ParameterServer, 1, 0);
  at::Tensor result = pool_.acquire(numel, input.options().dtype(accType));

  // Receives first: contributions to our shard (row q of `contrib` holds rank
  // q's; our own row stays unused), then every other reduced shard.
  at::Tensor contrib = pool_.acquire(n * own.length, input.options()).view({n, own.length});
  std::vector<Work> uplink(static_cast<size_t>(n)), downlink;
  if (own.length > 0) {
    for (int q = 0; q < n; ++q) {
      if (q == rank) continue;
      at::Tensor dst = contrib[q].view(at::kByte);
      uplink[static_cast<size_t>(q)] = comm_.recv(dst, q, upTag);
    }
  }
  for (int q = 0; q < n; ++q) {
    const Span& s = shards[static_cast<size_t>(q)];
    if (q == rank || s.length == 0) continue;
    at::Tensor dst = bytesOf(result, s);
    downlink.push_back(comm_.recv(dst, q, downTag));
  }
  std::vector<Work> sends;
  for (int q = 0; q < n; ++q) {
    const Span& s = shards[static_cast<size_t>(q)];
    if (q == rank || s.length == 0) continue;
    sends.push_back(comm_.send(bytesOf(input, s), q, upTag));
  }

  // Serve our shard: lift and combine in rank order, so the result does not
  // depend on arrival order.
  if (own.length > 0) {
    at::Tensor mine = result.slice(0, own.offset, own.offset + own.length);
    at::Tensor lifted = pool_.acquire(own.length, result.options());
    for (int q = 0; q < n; ++q) {
      at::Tensor part;
      if (q == rank) {
        part = input.slice(0, own.offset, own.offset + own.length);
      } else {
        uplink[static_cast<size_t>(q)].wait();
        part = contrib[q];
      }
      if (q == 0) {
        r.liftInto(part, mine);
      } else {
        r.liftInto(part, lifted);
        r.combine(mine, lifted);
      }
    }
    for (int q = 0; q < n; ++q)
      if (q != rank) sends.push_back(comm_.send(bytesOf(result, own), q, downTag));
  }
  waitAll(downlink);
  waitAll(sends);
  return result;
}

}  // namespace gradzip::comm
