// Communicator over c10d backends: ProcessGroupGloo for CPU tensors and, when
// compiled with GRADZIP_CUDA and a GPU is present, ProcessGroupNCCL for CUDA
// tensors. It checks dtype, device and layout before calling into Gloo (a
// refusal inside Gloo's worker thread can abort the process), applies the
// emulated latency (Communicator::setSendDelay) through a DelayLine, and turns
// every c10d failure into a CommError that names this rank, the operation and
// the peer. CUDA tensors are the exception to the delay line: NCCL orders its
// inputs by the issuing thread's current stream, so their delay holds the
// caller back instead. Without NCCL, CUDA tensors are refused unless the
// communicator was built to stage them through host memory over Gloo
// (comm/HostStaging.h, `comm.cuda_backend: gloo`).
#pragma once

#include "comm/Communicator.h"
#include "comm/CostModel.h"
#include "comm/DelayLine.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace gradzip::comm {

// Process-wide c10d settings; call at process start, before any thread exists
// (it edits the environment). Turns off torch's collective flight recorder
// (TORCH_FR_BUFFER_SIZE=0) unless the user set it: it captures a stack trace on
// every collective, and in torch 2.11 its per-group status map is written
// outside its lock, so several Gloo groups in one process (the thread-per-rank
// tests) race on it and crash.
void configureProcessGroups();

class ProcessGroupCommunicator final : public Communicator {
 public:
  // `cuda` may be null (CPU-only build, no GPU, or `comm.cuda_backend: gloo`);
  // then `stageCuda` lets CUDA tensors through Gloo by way of host copies.
  ProcessGroupCommunicator(c10::intrusive_ptr<c10d::Backend> gloo, c10::intrusive_ptr<c10d::Backend> cuda,
                           int rank, int size, std::chrono::milliseconds timeout, bool stageCuda = false);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backendName() const override { return cuda_ ? "gloo+nccl" : stageCuda_ ? "gloo+host-staged cuda" : "gloo"; }
  Work allReduce(at::Tensor& t, ReduceOp op) override;
  Work allGather(std::vector<at::Tensor>& out, const at::Tensor& in) override;
  Work broadcast(at::Tensor& t, int root) override;
  Work reduceScatter(at::Tensor& out, std::vector<at::Tensor>& in, ReduceOp op) override;
  Work send(const at::Tensor& t, int dst, int tag) override;
  Work recv(at::Tensor& t, int src, int tag) override;
  Work barrier() override;
  std::chrono::milliseconds timeout() const override { return timeout_; }

 private:
  // True when t is a CUDA tensor that goes through Gloo as a host copy.
  bool staged(const at::Tensor& t) const { return t.is_cuda() && !cuda_ && stageCuda_; }
  // The backend for tensors on t's device; validates dtype/layout for `op`.
  c10d::Backend& backendFor(const at::Tensor& t, const char* op);
  void checkPeer(int peer, const char* op) const;
  // Runs `fn` (which issues the c10d operation) now, or, with latency
  // emulation on, `rounds` send delays from now through the delay line (CUDA:
  // after holding the caller back), and wraps its Work for CommError and
  // CommStats.
  Work issue(DelayLine::Lane lane, double rounds, bool cuda, DelayLine::Issue fn, std::string op, std::string peer,
             int64_t sent, int64_t received);
  Work wrap(DelayLine::Issued issued, DelayLine::Clock::time_point start, DelayLine::Clock::time_point due,
            std::string op, std::string peer, int64_t sent, int64_t received);
  // issue() for an engine collective: rounds = engineRounds(op, size()).
  Work collective(EngineOp op, bool cuda, DelayLine::Issue fn, int64_t sent, int64_t received,
                  std::string peer = "");

  c10::intrusive_ptr<c10d::Backend> gloo_;
  c10::intrusive_ptr<c10d::Backend> cuda_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  bool stageCuda_;
  // Last: destroyed first, it issues what is still queued while the backends live.
  DelayLine delayLine_;
};

// Gloo accepts float, double, half, bfloat16, int8, uint8, int32 and int64.
bool glooSupports(at::ScalarType t);

}  // namespace gradzip::comm
