// Test helper: a Communicator that forwards every operation to another and
// counts the latency terms they make, so a cost model's α coefficients can be
// checked against what the code really issues. A round begins with the first
// operation issued after a wait() has returned: operations issued together
// and then waited for (TopK's two all-gathers, a ring step's send and recv)
// share one round; one issued only after another's result was waited for
// (TopKC's chunk all-reduce after its norm all-reduce) starts the next. A
// round weighs the most latency terms of its operations: a point-to-point
// message 1, and the engine's own collectives, opaque here, the α terms of
// their rows of the flexible-communication paper's Table I as
// comm/CostModel.h gives them (all-reduce 2(N−1), all-gather and broadcast
// log2 N; reduce-scatter, which Gloo runs as an all-reduce, the
// all-reduce's). Counted on one rank, so only where every rank's rounds are
// the critical path (two ranks: no tree has depth). It also counts the
// bytes this rank sends the same way: a point-to-point message its bytes (a
// receive none), an engine collective its Table I row's β term for the
// tensor it was given.
#pragma once

#include "comm/Communicator.h"
#include "comm/CostModel.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace gradzip::testing {

class RoundCounter final : public comm::Communicator {
 public:
  explicit RoundCounter(comm::Communicator& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backendName() const override { return inner_.backendName(); }
  comm::Work allReduce(at::Tensor& t, comm::ReduceOp op) override {
    bytes_ += comm::ringAllReduceCost(double(t.nbytes()), size(), kBetaOnly);
    return issue(inner_.allReduce(t, op), comm::ringAllReduceCost(0, size(), kAlphaOnly));
  }
  comm::Work allGather(std::vector<at::Tensor>& out, const at::Tensor& in) override {
    bytes_ += comm::allGatherCost(double(in.nbytes()), size(), kBetaOnly);
    return issue(inner_.allGather(out, in), comm::allGatherCost(0, size(), kAlphaOnly));
  }
  comm::Work broadcast(at::Tensor& t, int root) override {
    bytes_ += comm::broadcastCost(double(t.nbytes()), size(), kBetaOnly);
    return issue(inner_.broadcast(t, root), comm::broadcastCost(0, size(), kAlphaOnly));
  }
  comm::Work reduceScatter(at::Tensor& out, std::vector<at::Tensor>& in, comm::ReduceOp op) override {
    for (const auto& t : in) bytes_ += comm::ringAllReduceCost(double(t.nbytes()), size(), kBetaOnly);
    return issue(inner_.reduceScatter(out, in, op), comm::ringAllReduceCost(0, size(), kAlphaOnly));
  }
  comm::Work send(const at::Tensor& t, int dst, int tag) override {
    bytes_ += double(t.nbytes());
    return issue(inner_.send(t, dst, tag), 1.0);
  }
  comm::Work recv(at::Tensor& t, int src, int tag) override { return issue(inner_.recv(t, src, tag), 1.0); }
  comm::Work barrier() override { return issue(inner_.barrier(), 1.0); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }

  // Latency terms since construction or the last reset(): Σ over rounds of
  // the round's weight.
  double latencyTerms() const { return done_ + current_; }
  // Bytes sent since construction or the last reset().
  double bytesSent() const { return bytes_; }
  void reset() {
    done_ = current_ = bytes_ = 0;
    waited_ = true;
  }

 private:
  // α = 1 s, β = 0: a Table I cost is then its count of latency terms.
  static constexpr comm::NetworkParams kAlphaOnly{1.0, 0.0};
  // α = 0, β = 1 s per byte: a Table I cost is then its bytes.
  static constexpr comm::NetworkParams kBetaOnly{0.0, 1.0};

  class Tracked final : public comm::Work::Impl {
   public:
    Tracked(comm::Work w, RoundCounter* owner) : w_(std::move(w)), owner_(owner) {}
    void wait() override {
      w_.wait();
      owner_->waited_ = true;
    }
    bool isCompleted() override { return w_.isCompleted(); }

   private:
    comm::Work w_;
    RoundCounter* owner_;
  };

  // Operations are issued from the calling thread only (the compressors'
  // aggregate()), so the counts need no lock; waited_ is set by wait().
  comm::Work issue(comm::Work w, double weight) {
    if (waited_.exchange(false)) {
      done_ += current_;
      current_ = 0;
    }
    current_ = std::max(current_, weight);
    return comm::Work(std::make_shared<Tracked>(std::move(w), this));
  }

  comm::Communicator& inner_;
  double done_ = 0, current_ = 0, bytes_ = 0;
  std::atomic<bool> waited_{true};
};

}  // namespace gradzip::testing
