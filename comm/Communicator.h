// The Communicator: rank, size and asynchronous collectives on at::Tensor, the
// one interface through which gradzip moves bytes. Implementations wrap a c10d
// backend (ProcessGroupCommunicator: Gloo for CPU tensors, NCCL for CUDA
// tensors) or stand alone for one rank (LocalCommunicator). Every operation
// returns a Work whose wait() rethrows a failure as CommError naming this rank,
// the operation and, for point-to-point, the peer. Bytes and seconds of every
// operation are counted in CommStats. comm/ knows nothing about compression.
#pragma once

#include "comm/CommStats.h"

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gradzip::comm {

enum class ReduceOp { Sum, Max, Min };
const char* toString(ReduceOp op);

// Handle of an operation in flight. wait() blocks until it finishes (or the
// communicator's timeout passes) and rethrows any failure as CommError. A
// default-constructed Work is already complete. wait() may be called more than
// once; only the first call records timing.
class Work {
 public:
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual void wait() = 0;
    virtual bool isCompleted() = 0;
  };
  Work() = default;
  explicit Work(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  void wait() {
    if (impl_) impl_->wait();
  }
  bool isCompleted() { return !impl_ || impl_->isCompleted(); }

 private:
  std::shared_ptr<Impl> impl_;
};

// Waits for every handle, rethrowing the first failure after all have finished.
void waitAll(std::vector<Work>& works);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "gloo", "nccl" or "local".
  virtual std::string backendName() const = 0;

  // In place: every rank ends with op over all ranks' `t`.
  virtual Work allReduce(at::Tensor& t, ReduceOp op = ReduceOp::Sum) = 0;
  // out[r] receives rank r's `in`; out must hold size() tensors shaped like `in`.
  virtual Work allGather(std::vector<at::Tensor>& out, const at::Tensor& in) = 0;
  // In place: every rank ends with root's `t`.
  virtual Work broadcast(at::Tensor& t, int root) = 0;
  // out = op over ranks of in[rank()]; in holds size() tensors shaped like out.
  // (Gloo implements this as an all-reduce, at twice the traffic: DESIGN.md §3.)
  virtual Work reduceScatter(at::Tensor& out, std::vector<at::Tensor>& in, ReduceOp op = ReduceOp::Sum) = 0;
  // Point-to-point; `t` must stay alive and unmodified until the Work completes.
  // The emulated latency (setSendDelay) delays send(), never recv().
  virtual Work send(const at::Tensor& t, int dst, int tag) = 0;
  virtual Work recv(at::Tensor& t, int src, int tag) = 0;
  virtual Work barrier() = 0;

  // Timeout of every blocking operation.
  virtual std::chrono::milliseconds timeout() const = 0;

  // Latency emulation (netem is absent on our kernels; DESIGN.md §8): every
  // message round pays `delay`, whichever plan makes it. A send() is issued
  // `delay` after the call, an engine collective (allReduce, allGather,
  // broadcast, reduceScatter, barrier) engineRounds(op, size()) × `delay`
  // after it: the α terms of its row of Table I (comm/CostModel.h; all-reduce
  // and reduce-scatter as a ring, 2(N−1); all-gather, broadcast and barrier
  // log2 N), so a plan over gradzip's point-to-point collectives and one on the
  // engine that make the same rounds take the same emulated time, and a probed
  // α prices both. The delay holds back the message, not the caller (CUDA
  // tensors excepted: ProcessGroupCommunicator.h): messages sent together share
  // one round, so a ring all-reduce, each step waiting for the last one's
  // message, pays 2(N−1) delays, and a parameter server's N−1 uplinks pay one.
  // Every operation pays, control messages too (finiteness flags, the
  // controller's broadcasts, barriers): they are message rounds on a real
  // network, and a rule without exceptions charges every plan alike. Zero
  // disables it; a communicator without a network (LocalCommunicator)
  // ignores it.
  void setSendDelay(std::chrono::microseconds delay) { sendDelay_ = delay; }
  std::chrono::microseconds sendDelay() const { return sendDelay_; }

  CommStats& stats() { return stats_; }
  const CommStats& stats() const { return stats_; }

 protected:
  std::chrono::microseconds sendDelay_{0};
  CommStats stats_;
};

}  // namespace gradzip::comm
