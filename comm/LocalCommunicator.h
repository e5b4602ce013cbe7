// The trivial Communicator for world size 1: collectives are identities (or
// copies) and point-to-point is an error, so single-process runs need no
// rendezvous. Stats are still recorded so step breakdowns stay uniform.
#pragma once

#include "comm/Communicator.h"

namespace gradzip::comm {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backendName() const override { return "local"; }
  Work allReduce(at::Tensor& t, ReduceOp op) override;
  Work allGather(std::vector<at::Tensor>& out, const at::Tensor& in) override;
  Work broadcast(at::Tensor& t, int root) override;
  Work reduceScatter(at::Tensor& out, std::vector<at::Tensor>& in, ReduceOp op) override;
  Work send(const at::Tensor& t, int dst, int tag) override;
  Work recv(at::Tensor& t, int src, int tag) override;
  Work barrier() override { return {}; }
  std::chrono::milliseconds timeout() const override { return std::chrono::milliseconds(0); }
};

}  // namespace gradzip::comm
