// Implements comm/LocalCommunicator.h.
#include "comm/LocalCommunicator.h"

#include "util/Error.h"

namespace gradzip::comm {

Work LocalCommunicator::allReduce(at::Tensor& t, ReduceOp) {
  stats_.record("allreduce", 0, 0, 0.0);
  return {};
}

Work LocalCommunicator::allGather(std::vector<at::Tensor>& out, const at::Tensor& in) {
  GZ_CHECK(out.size() == 1, "allGather: expected 1 output tensor for world size 1, got {}", out.size());
  out[0].copy_(in);
  stats_.record("allgather", 0, 0, 0.0);
  return {};
}

Work LocalCommunicator::broadcast(at::Tensor&, int root) {
  GZ_CHECK(root == 0, "broadcast: root {} out of range for world size 1", root);
  return {};
}

Work LocalCommunicator::reduceScatter(at::Tensor& out, std::vector<at::Tensor>& in, ReduceOp) {
  GZ_CHECK(in.size() == 1, "reduceScatter: expected 1 input tensor for world size 1, got {}", in.size());
  out.copy_(in[0]);
  return {};
}

Work LocalCommunicator::send(const at::Tensor&, int dst, int) {
  throw CommError(fmt::format("send to rank {}: world size is 1, there is no peer", dst));
}

Work LocalCommunicator::recv(at::Tensor&, int src, int) {
  throw CommError(fmt::format("recv from rank {}: world size is 1, there is no peer", src));
}

}  // namespace gradzip::comm
