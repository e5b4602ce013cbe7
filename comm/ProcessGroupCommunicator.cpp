// Implements comm/ProcessGroupCommunicator.h: thin, checked wrappers over c10d
// collectives whose Work handles time the operation and rethrow as CommError.
#include "comm/ProcessGroupCommunicator.h"

#include "util/Error.h"

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstdlib>
#include <thread>

namespace gradzip::comm {
namespace {

using Clock = std::chrono::steady_clock;

class C10dWork final : public Work::Impl {
 public:
  C10dWork(c10::intrusive_ptr<c10d::Work> w, std::string what, CommStats* stats, std::string op, int64_t sent,
           int64_t received, std::chrono::milliseconds timeout)
      : work_(std::move(w)), what_(std::move(what)), stats_(stats), op_(std::move(op)), sent_(sent),
        received_(received), timeout_(timeout), start_(Clock::now()) {}

  void wait() override {
    if (done_) {
      if (error_) std::rethrow_exception(error_);
      return;
    }
    done_ = true;
    try {
      work_->wait(timeout_);
    } catch (const std::exception& e) {
      error_ = std::make_exception_ptr(CommError(fmt::format("{} failed: {}", what_, firstLine(e.what()))));
      std::rethrow_exception(error_);
    }
    stats_->record(op_, sent_, received_, std::chrono::duration<double>(Clock::now() - start_).count());
  }
  bool isCompleted() override { return work_->isCompleted(); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::string what_;
  CommStats* stats_;
  std::string op_;
  int64_t sent_, received_;
  std::chrono::milliseconds timeout_;
  Clock::time_point start_;
  bool done_ = false;
  std::exception_ptr error_;
};

c10d::ReduceOp toC10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return c10d::ReduceOp::SUM;
    case ReduceOp::Max: return c10d::ReduceOp::MAX;
    case ReduceOp::Min: return c10d::ReduceOp::MIN;
  }
  GZ_ASSERT(false, "unknown ReduceOp");
}

int64_t bytesOf(const at::Tensor& t) { return static_cast<int64_t>(t.numel()) * t.element_size(); }

}  // namespace

void configureProcessGroups() { setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0); }

bool glooSupports(at::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
    case at::kChar: case at::kByte: case at::kInt: case at::kLong:
      return true;
    default:
      return false;
  }
}

ProcessGroupCommunicator::ProcessGroupCommunicator(c10::intrusive_ptr<c10d::Backend> gloo,
                                                   c10::intrusive_ptr<c10d::Backend> cuda, int rank, int size,
                                                   std::chrono::milliseconds timeout)
    : gloo_(std::move(gloo)), cuda_(std::move(cuda)), rank_(rank), size_(size), timeout_(timeout) {
  GZ_ASSERT(gloo_, "a Gloo backend is required");
}

c10d::Backend& ProcessGroupCommunicator::backendFor(const at::Tensor& t, const char* op) {
  GZ_CHECK(t.defined(), "rank {}: {}: undefined tensor", rank_, op);
  GZ_CHECK(t.layout() == at::kStrided, "rank {}: {}: only dense tensors can be communicated", rank_, op);
  GZ_CHECK(t.is_contiguous(), "rank {}: {}: tensor must be contiguous (call .contiguous() first)", rank_, op);
  if (t.is_cuda()) {
    GZ_CHECK(cuda_, "rank {}: {}: CUDA tensor given but no NCCL backend is available "
             "(build with GRADZIP_CUDA=ON on a machine with a GPU)", rank_, op);
    return *cuda_;
  }
  GZ_CHECK(t.device().is_cpu(), "rank {}: {}: unsupported device {}", rank_, op, t.device().str());
  GZ_CHECK(glooSupports(t.scalar_type()),
           "rank {}: {}: Gloo cannot communicate dtype {} (supported: float, double, half, bfloat16, "
           "int8, uint8, int32, int64)", rank_, op, c10::toString(t.scalar_type()));
  return *gloo_;
}

void ProcessGroupCommunicator::checkPeer(int peer, const char* op) const {
  GZ_CHECK(peer >= 0 && peer < size_ && peer != rank_, "rank {}: {}: invalid peer rank {} (world size {})", rank_,
           op, peer, size_);
}

Work ProcessGroupCommunicator::wrap(c10::intrusive_ptr<c10d::Work> w, std::string op, std::string peer,
                                    int64_t sent, int64_t received) {
  std::string what = fmt::format("rank {}: {}{}", rank_, op, peer);
  return Work(std::make_shared<C10dWork>(std::move(w), std::move(what), &stats_, std::move(op), sent, received,
                                         timeout_));
}

Work ProcessGroupCommunicator::allReduce(at::Tensor& t, ReduceOp op) {
  auto& b = backendFor(t, "allreduce");
  std::vector<at::Tensor> ts{t};
  c10d::AllreduceOptions o;
  o.reduceOp = toC10d(op);
  o.timeout = timeout_;
  return wrap(b.allreduce(ts, o), "allreduce", "", bytesOf(t), bytesOf(t));
}

Work ProcessGroupCommunicator::allGather(std::vector<at::Tensor>& out, const at::Tensor& in) {
  auto& b = backendFor(in, "allgather");
  GZ_CHECK(static_cast<int>(out.size()) == size_, "rank {}: allgather: expected {} output tensors, got {}", rank_,
           size_, out.size());
  for (auto& o : out) {
    GZ_CHECK(o.sizes() == in.sizes() && o.scalar_type() == in.scalar_type(),
             "rank {}: allgather: output tensors must match the input's shape and dtype", rank_);
    backendFor(o, "allgather");
  }
  std::vector<std::vector<at::Tensor>> outs{out};
  std::vector<at::Tensor> ins{in};
  c10d::AllgatherOptions o;
  o.timeout = timeout_;
  return wrap(b.allgather(outs, ins, o), "allgather", "", bytesOf(in) * (size_ - 1), bytesOf(in) * (size_ - 1));
}

Work ProcessGroupCommunicator::broadcast(at::Tensor& t, int root) {
  auto& b = backendFor(t, "broadcast");
  GZ_CHECK(root >= 0 && root < size_, "rank {}: broadcast: root {} out of range (world size {})", rank_, root,
           size_);
  std::vector<at::Tensor> ts{t};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  o.timeout = timeout_;
  const bool isRoot = root == rank_;
  return wrap(b.broadcast(ts, o), "broadcast", fmt::format(" from rank {}", root), isRoot ? bytesOf(t) : 0,
              isRoot ? 0 : bytesOf(t));
}

Work ProcessGroupCommunicator::reduceScatter(at::Tensor& out, std::vector<at::Tensor>& in, ReduceOp op) {
  auto& b = backendFor(out, "reducescatter");
  GZ_CHECK(static_cast<int>(in.size()) == size_, "rank {}: reducescatter: expected {} input tensors, got {}", rank_,
           size_, in.size());
  for (auto& i : in) {
    GZ_CHECK(i.sizes() == out.sizes() && i.scalar_type() == out.scalar_type(),
             "rank {}: reducescatter: input tensors must match the output's shape and dtype", rank_);
    backendFor(i, "reducescatter");
  }
  std::vector<at::Tensor> outs{out};
  std::vector<std::vector<at::Tensor>> ins{in};
  c10d::ReduceScatterOptions o;
  o.reduceOp = toC10d(op);
  o.timeout = timeout_;
  const int64_t bytes = bytesOf(out) * (size_ - 1);
  return wrap(b.reduce_scatter(outs, ins, o), "reducescatter", "", bytes, bytes);
}

Work ProcessGroupCommunicator::send(const at::Tensor& t, int dst, int tag) {
  auto& b = backendFor(t, "send");
  checkPeer(dst, "send");
  if (sendDelay_.count() > 0) std::this_thread::sleep_for(sendDelay_);  // latency emulation, DESIGN.md §8
  std::vector<at::Tensor> ts{t};
  return wrap(b.send(ts, dst, tag), "send", fmt::format(" to rank {} (tag {})", dst, tag), bytesOf(t), 0);
}

Work ProcessGroupCommunicator::recv(at::Tensor& t, int src, int tag) {
  auto& b = backendFor(t, "recv");
  checkPeer(src, "recv");
  std::vector<at::Tensor> ts{t};
  return wrap(b.recv(ts, src, tag), "recv", fmt::format(" from rank {} (tag {})", src, tag), 0, bytesOf(t));
}

Work ProcessGroupCommunicator::barrier() {
  c10d::BarrierOptions o;
  o.timeout = timeout_;
  return wrap(gloo_->barrier(o), "barrier", "", 0, 0);
}

}  // namespace gradzip::comm
