// A co-located sharded parameter server over the Communicator's point-to-point
// send/recv, for schemes whose server does more than a Reduction can express
// on packed bytes: THC's PS form (b-bit packed uplink, lookup-and-add, widened
// packed downlink) and C_nat's (8-bit uplink, 64-bit integer sum, C_nat
// re-compression, 8-bit downlink). Rank j owns shard j: every rank sends its
// bytes of shard j to rank j (its own shard stays local), the owner reduces the
// n contributions to one downlink message and sends it to every rank. Each rank
// sends exactly its uplink bytes for the n−1 foreign shards and, as an owner,
// n−1 copies of its downlink message.
#pragma once

#include "comm/Communicator.h"
#include "compress/Compressor.h"

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace gradzip::compress {

// Shard boundaries: `units` items (e.g. 8-coordinate groups) split into `n`
// contiguous shards as evenly as possible; returns n+1 offsets in units.
std::vector<int64_t> shardOffsets(int64_t units, int n);

// uplink[j]: this rank's uint8 bytes for shard j (every rank passes the same
// sizes). ownerReduce(received) gets the n contributions to this rank's shard
// in rank order and returns the downlink bytes (uint8) of downlinkBytes[rank()]
// bytes. Returns the downlink message of every shard j (own one included), the
// same bytes on every rank. `tag` separates concurrent users. Counts sent bytes
// into times->bytesSent when times is set. Throws CommError on failure.
std::vector<at::Tensor> psExchange(comm::Communicator& comm, const std::vector<at::Tensor>& uplink,
                                   const std::function<at::Tensor(const std::vector<at::Tensor>&)>& ownerReduce,
                                   const std::vector<int64_t>& downlinkBytes, int tag, PhaseTimes* times);

}  // namespace gradzip::compress
