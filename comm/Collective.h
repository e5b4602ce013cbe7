// Collective algorithms built from the Communicator's point-to-point send/recv,
// parameterised by an element-wise Reduction (comm/Reduction.h). They exist for
// compressed-domain aggregation that Gloo/NCCL cannot express; plain float sums
// may use the engine's own all-reduce (EngineAllReduce), and the faster wins.
//
// Contract of allReduce: every rank calls it with a 1-D contiguous tensor of the
// same numel and dtype; every rank returns the same accumulator (dtype
// r.accType(input dtype)), bit-identical across ranks. Lengths not divisible
// by the world size, 0 and 1 elements are valid. Failures surface as CommError.
// Algorithms (flexible-communication paper Table I gives their α-β costs):
//   ring    reduce-scatter then all-gather over a ring; 2(N-1) steps
//   tree    binary-tree reduce to rank 0, then broadcast down the tree
//   ps      co-located sharded parameter server: rank i owns shard i, everyone
//           sends shard i to rank i, rank i reduces and sends the result back
//   engine  the communicator's own all-reduce (sum only)
#pragma once

#include "comm/Communicator.h"
#include "comm/Reduction.h"

#include <memory>
#include <string>
#include <vector>

namespace gradzip::comm {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual std::string name() const = 0;
  // See the file comment for the contract.
  virtual at::Tensor allReduce(const at::Tensor& input, const Reduction& r) = 0;
};

// Every rank receives every rank's 1-D `input` (same numel everywhere), stacked
// into [size, numel] in rank order; a ring over send/recv.
at::Tensor ringAllGather(Communicator& comm, const at::Tensor& input);

// "ring", "tree", "ps" or "engine"; unknown names list the known ones.
std::unique_ptr<Collective> makeCollective(const std::string& name, Communicator& comm);
std::vector<std::string> collectiveNames();

}  // namespace gradzip::comm
