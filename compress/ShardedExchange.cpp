// Implements compress/ShardedExchange.h: all receives and sends of a phase are
// posted before any wait, so no ordering between peers can deadlock.
#include "compress/ShardedExchange.h"

#include "util/Error.h"

namespace gradzip::compress {

std::vector<int64_t> shardOffsets(int64_t units, int n) {
  GZ_ASSERT(n >= 1 && units >= 0, "shardOffsets: bad arguments");
  std::vector<int64_t> off(n + 1);
  for (int j = 0; j <= n; ++j) off[j] = units * j / n;
  return off;
}

std::vector<at::Tensor> psExchange(comm::Communicator& comm, const std::vector<at::Tensor>& uplink,
                                   const std::function<at::Tensor(const std::vector<at::Tensor>&)>& ownerReduce,
                                   const std::vector<int64_t>& downlinkBytes, int tag, PhaseTimes* times) {
  const int n = comm.size(), me = comm.rank();
  GZ_ASSERT(static_cast<int>(uplink.size()) == n && static_cast<int>(downlinkBytes.size()) == n,
            "psExchange: need one uplink message and one downlink size per rank");
  int64_t sent = 0;

  // Uplink: contributions to my shard arrive from every other rank.
  std::vector<at::Tensor> received(n);
  std::vector<comm::Work> works;
  for (int i = 0; i < n; ++i) {
    if (i == me) {
      received[i] = uplink[me];
    } else {
      received[i] = at::empty({uplink[me].numel()}, uplink[me].options());
      if (received[i].numel() > 0) works.push_back(comm.recv(received[i], i, tag));
    }
  }
  for (int j = 0; j < n; ++j) {
    if (j == me || uplink[j].numel() == 0) continue;
    works.push_back(comm.send(uplink[j], j, tag));
    sent += uplink[j].numel();
  }
  comm::waitAll(works);
  works.clear();

  // The owner reduces; the result goes back to everyone.
  std::vector<at::Tensor> down(n);
  down[me] = ownerReduce(received).contiguous();
  GZ_ASSERT(down[me].scalar_type() == at::kByte && down[me].numel() == downlinkBytes[me],
            "psExchange: owner produced {} bytes, expected {}", down[me].numel(), downlinkBytes[me]);
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    down[j] = at::empty({downlinkBytes[j]}, down[me].options());
    if (downlinkBytes[j] > 0) works.push_back(comm.recv(down[j], j, tag + 1));
  }
  if (down[me].numel() > 0)
    for (int i = 0; i < n; ++i) {
      if (i == me) continue;
      works.push_back(comm.send(down[me], i, tag + 1));
      sent += down[me].numel();
    }
  comm::waitAll(works);
  if (times) times->bytesSent += sent;
  return down;
}

}  // namespace gradzip::compress
