// Parameter-server all-reduce in its co-located, sharded form: rank i is the
// server of shard i (comm/Chunking.h evenSplit). Every rank sends its raw shard
// i (the narrow wire dtype, e.g. THC's uint8 codes) to rank i; rank i lifts and
// combines the N contributions in rank order and sends the accumulated shard
// (the accumulator dtype: a widened downlink) back to every rank. Each rank
// sends and receives (N-1)/N of the tensor per direction, in one round
// (flexible-communication paper Table I lists the star form, 2α + 2(N-1)Mβ at
// the server; sharding spreads that load over N servers). THC (§3, Alg. 2)
// aggregates this way.
#pragma once

#include "comm/BufferPool.h"
#include "comm/Collective.h"

namespace gradzip::comm {

class ParameterServer final : public Collective {
 public:
  explicit ParameterServer(Communicator& comm);
  std::string name() const override { return "ps"; }
  // Collective.h contract. Uplink bytes are the input dtype's, downlink bytes
  // the accumulator dtype's. Result and scratch come from a BufferPool.
  at::Tensor allReduce(const at::Tensor& input, const Reduction& r) override;

 private:
  Communicator& comm_;
  BufferPool pool_;
};

}  // namespace gradzip::comm
