// The delay line of latency emulation (Communicator::setSendDelay): c10d
// operations submitted with a due time are issued by one background thread
// once that time has come, so the caller never blocks, and operations
// submitted together leave together and share one round, as messages in
// flight on a real link do. Each lane issues in submission order, because
// c10d matches point-to-point messages by their order within a (peer, tag)
// and collectives by their order on every rank; an entry due before its
// predecessor waits for it. The thread starts with the first submission.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace gradzip::comm {

class DelayLine {
 public:
  using Clock = std::chrono::steady_clock;
  using Issue = std::function<c10::intrusive_ptr<c10d::Work>()>;
  using Issued = std::shared_future<c10::intrusive_ptr<c10d::Work>>;
  // Independent issue orders: sends among themselves, collectives among themselves.
  enum class Lane { PointToPoint = 0, Collective = 1 };

  DelayLine() = default;
  // Issues everything still queued, each at its due time, then stops the thread.
  ~DelayLine();
  DelayLine(const DelayLine&) = delete;
  DelayLine& operator=(const DelayLine&) = delete;

  // Runs `issue` on the line's thread at `due`, or once every earlier entry of
  // `lane` has been issued, whichever is later. The future holds the Work
  // `issue` returned or the exception it threw.
  Issued submit(Lane lane, Clock::time_point due, Issue issue);
  // Whether an entry of `lane` is queued or being issued. A caller that would
  // issue directly (no delay) must go through the line while it is busy, or
  // it overtakes the entries before it.
  bool busy(Lane lane) const;

 private:
  struct Entry {
    Clock::time_point due;
    Issue issue;
    std::promise<c10::intrusive_ptr<c10d::Work>> result;
  };
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> lanes_[2];
  bool issuing_[2] = {false, false};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gradzip::comm
