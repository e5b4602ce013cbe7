// Implements comm/ProcessGroupCommunicator.h: thin, checked wrappers over c10d
// collectives whose Work handles time the operation and rethrow as CommError.
// Every operation goes through issue(), which applies the emulated latency.
#include "comm/ProcessGroupCommunicator.h"

#include "comm/HostStaging.h"
#include "util/Error.h"

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstdlib>
#include <future>
#include <thread>

namespace gradzip::comm {
namespace {

using Clock = std::chrono::steady_clock;

// A c10d operation, issued now or by the delay line. Timed from the call, so
// an emulated delay counts in CommStats as the network's time.
class C10dWork final : public Work::Impl {
 public:
  C10dWork(DelayLine::Issued issued, Clock::time_point start, Clock::time_point due, std::string what,
           CommStats* stats, std::string op, int64_t sent, int64_t received, std::chrono::milliseconds timeout)
      : issued_(std::move(issued)), what_(std::move(what)), stats_(stats), op_(std::move(op)), sent_(sent),
        received_(received), timeout_(timeout), start_(start), due_(due) {}

  void wait() override {
    if (done_) {
      if (error_) std::rethrow_exception(error_);
      return;
    }
    done_ = true;
    try {
      // The line issues at `due`; a timeout past it means its thread is stuck.
      if (issued_.wait_until(due_ + timeout_) != std::future_status::ready)
        throw std::runtime_error("the latency emulation's delay line did not issue it in time");
      issued_.get()->wait(timeout_);
    } catch (const std::exception& e) {
      error_ = std::make_exception_ptr(CommError(fmt::format("{} failed: {}", what_, firstLine(e.what()))));
      std::rethrow_exception(error_);
    }
    stats_->record(op_, sent_, received_, std::chrono::duration<double>(Clock::now() - start_).count());
  }
  bool isCompleted() override {
    if (issued_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    try {
      return issued_.get()->isCompleted();
    } catch (...) {
      return true;  // failed to issue: complete, and wait() rethrows
    }
  }

 private:
  DelayLine::Issued issued_;
  std::string what_;
  CommStats* stats_;
  std::string op_;
  int64_t sent_, received_;
  std::chrono::milliseconds timeout_;
  Clock::time_point start_, due_;
  bool done_ = false;
  std::exception_ptr error_;
};

DelayLine::Issued issuedNow(c10::intrusive_ptr<c10d::Work> w) {
  std::promise<c10::intrusive_ptr<c10d::Work>> p;
  p.set_value(std::move(w));
  return p.get_future().share();
}

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
                                                   std::chrono::milliseconds timeout, bool stageCuda)
    : gloo_(std::move(gloo)), cuda_(std::move(cuda)), rank_(rank), size_(size), timeout_(timeout),
      stageCuda_(stageCuda) {
  GZ_ASSERT(gloo_, "a Gloo backend is required");
}

c10d::Backend& ProcessGroupCommunicator::backendFor(const at::Tensor& t, const char* op) {
  GZ_CHECK(t.defined(), "rank {}: {}: undefined tensor", rank_, op);
  GZ_CHECK(t.layout() == at::kStrided, "rank {}: {}: only dense tensors can be communicated", rank_, op);
  GZ_CHECK(t.is_contiguous(), "rank {}: {}: tensor must be contiguous (call .contiguous() first)", rank_, op);
  if (t.is_cuda()) {
    GZ_CHECK(cuda_, "rank {}: {}: CUDA tensor given but this communicator has no NCCL backend (comm.cuda_backend: "
             "nccl needs a CUDA build and a GPU per rank; `comm.cuda_backend: gloo` stages CUDA tensors through host "
             "memory instead)", rank_, op);
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

Work ProcessGroupCommunicator::issue(DelayLine::Lane lane, double rounds, bool cuda, DelayLine::Issue fn,
                                     std::string op, std::string peer, int64_t sent, int64_t received) {
  const auto start = Clock::now();
  const auto delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::micro>(rounds * static_cast<double>(sendDelay_.count())));
  DelayLine::Issued issued;
  if (cuda) {
    if (delay.count() > 0) std::this_thread::sleep_for(delay);  // NCCL: see the header
    issued = issuedNow(fn());
  } else if (delay.count() > 0 || delayLine_.busy(lane)) {
    issued = delayLine_.submit(lane, start + delay, std::move(fn));
  } else {
    issued = issuedNow(fn());
  }
  return wrap(std::move(issued), start, start + delay, std::move(op), std::move(peer), sent, received);
}

Work ProcessGroupCommunicator::wrap(DelayLine::Issued issued, Clock::time_point start, Clock::time_point due,
                                    std::string op, std::string peer, int64_t sent, int64_t received) {
  std::string what = fmt::format("rank {}: {}{}", rank_, op, peer);
  return Work(std::make_shared<C10dWork>(std::move(issued), start, due, std::move(what), &stats_, std::move(op), sent,
                                         received, timeout_));
}

Work ProcessGroupCommunicator::collective(EngineOp op, bool cuda, DelayLine::Issue fn, int64_t sent,
                                          int64_t received, std::string peer) {
  return issue(DelayLine::Lane::Collective, engineRounds(op, size_), cuda, std::move(fn), toString(op),
               std::move(peer), sent, received);
}

Work ProcessGroupCommunicator::allReduce(at::Tensor& t, ReduceOp op) {
  if (staged(t)) {
    at::Tensor host = hostCopy(t);
    return withCopyBack(allReduce(host, op), {{t, host}});
  }
  auto& b = backendFor(t, "allreduce");
  c10d::AllreduceOptions o;
  o.reduceOp = toC10d(op);
  o.timeout = timeout_;
  return collective(EngineOp::AllReduce, t.is_cuda(), [&b, ts = std::vector<at::Tensor>{t}, o]() mutable {
    return b.allreduce(ts, o);
  }, bytesOf(t), bytesOf(t));
}

Work ProcessGroupCommunicator::allGather(std::vector<at::Tensor>& out, const at::Tensor& in) {
  if (staged(in)) {
    std::vector<at::Tensor> hostOut;
    std::vector<std::pair<at::Tensor, at::Tensor>> back;
    for (auto& o : out) {
      hostOut.push_back(at::empty_like(o, o.options().device(at::kCPU)));
      back.emplace_back(o, hostOut.back());
    }
    const at::Tensor hostIn = hostCopy(in);
    Work w = allGather(hostOut, hostIn);
    return withCopyBack(std::move(w), std::move(back));
  }
  auto& b = backendFor(in, "allgather");
  GZ_CHECK(static_cast<int>(out.size()) == size_, "rank {}: allgather: expected {} output tensors, got {}", rank_,
           size_, out.size());
  for (auto& o : out) {
    GZ_CHECK(o.sizes() == in.sizes() && o.scalar_type() == in.scalar_type(),
             "rank {}: allgather: output tensors must match the input's shape and dtype", rank_);
    backendFor(o, "allgather");
  }
  c10d::AllgatherOptions o;
  o.timeout = timeout_;
  const int64_t bytes = bytesOf(in) * (size_ - 1);
  return collective(EngineOp::AllGather, in.is_cuda(),
                    [&b, outs = std::vector<std::vector<at::Tensor>>{out}, ins = std::vector<at::Tensor>{in},
                     o]() mutable { return b.allgather(outs, ins, o); },
                    bytes, bytes);
}

Work ProcessGroupCommunicator::broadcast(at::Tensor& t, int root) {
  if (staged(t)) {
    at::Tensor host = hostCopy(t);
    return withCopyBack(broadcast(host, root), {{t, host}});
  }
  auto& b = backendFor(t, "broadcast");
  GZ_CHECK(root >= 0 && root < size_, "rank {}: broadcast: root {} out of range (world size {})", rank_, root,
           size_);
  c10d::BroadcastOptions o;
  o.rootRank = root;
  o.timeout = timeout_;
  const bool isRoot = root == rank_;
  return collective(EngineOp::Broadcast, t.is_cuda(), [&b, ts = std::vector<at::Tensor>{t}, o]() mutable {
    return b.broadcast(ts, o);
  }, isRoot ? bytesOf(t) : 0, isRoot ? 0 : bytesOf(t), fmt::format(" from rank {}", root));
}

Work ProcessGroupCommunicator::reduceScatter(at::Tensor& out, std::vector<at::Tensor>& in, ReduceOp op) {
  if (staged(out)) {
    at::Tensor hostOut = hostCopy(out);
    std::vector<at::Tensor> hostIn;
    for (const auto& i : in) hostIn.push_back(hostCopy(i));
    return withCopyBack(reduceScatter(hostOut, hostIn, op), {{out, hostOut}});
  }
  auto& b = backendFor(out, "reducescatter");
  GZ_CHECK(static_cast<int>(in.size()) == size_, "rank {}: reducescatter: expected {} input tensors, got {}", rank_,
           size_, in.size());
  for (auto& i : in) {
    GZ_CHECK(i.sizes() == out.sizes() && i.scalar_type() == out.scalar_type(),
             "rank {}: reducescatter: input tensors must match the output's shape and dtype", rank_);
    backendFor(i, "reducescatter");
  }
  c10d::ReduceScatterOptions o;
  o.reduceOp = toC10d(op);
  o.timeout = timeout_;
  const int64_t bytes = bytesOf(out) * (size_ - 1);
  return collective(EngineOp::ReduceScatter, out.is_cuda(),
                    [&b, outs = std::vector<at::Tensor>{out}, ins = std::vector<std::vector<at::Tensor>>{in},
                     o]() mutable { return b.reduce_scatter(outs, ins, o); },
                    bytes, bytes);
}

Work ProcessGroupCommunicator::send(const at::Tensor& t, int dst, int tag) {
  if (staged(t)) return send(hostCopy(t), dst, tag);  // the issued operation keeps the copy alive
  auto& b = backendFor(t, "send");
  checkPeer(dst, "send");
  // One message: one round of emulated latency (DESIGN.md §8).
  return issue(
      DelayLine::Lane::PointToPoint, 1.0, t.is_cuda(),
      [&b, ts = std::vector<at::Tensor>{t}, dst, tag]() mutable { return b.send(ts, dst, tag); }, "send",
      fmt::format(" to rank {} (tag {})", dst, tag), bytesOf(t), 0);
}

Work ProcessGroupCommunicator::recv(at::Tensor& t, int src, int tag) {
  if (staged(t)) {
    at::Tensor host = at::empty_like(t, t.options().device(at::kCPU));
    return withCopyBack(recv(host, src, tag), {{t, host}});
  }
  auto& b = backendFor(t, "recv");
  checkPeer(src, "recv");
  std::vector<at::Tensor> ts{t};
  // Posted at once, never behind the delay line: its message paid when it was
  // sent, and receives are matched in their own order, not the sends'.
  const auto now = Clock::now();
  return wrap(issuedNow(b.recv(ts, src, tag)), now, now, "recv", fmt::format(" from rank {} (tag {})", src, tag), 0,
              bytesOf(t));
}

Work ProcessGroupCommunicator::barrier() {
  c10d::BarrierOptions o;
  o.timeout = timeout_;
  return collective(EngineOp::Barrier, false, [this, o]() mutable { return gloo_->barrier(o); }, 0, 0);
}

}  // namespace gradzip::comm
