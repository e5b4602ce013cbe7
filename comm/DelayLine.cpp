// Implements comm/DelayLine.h. The thread always takes the lane head that is
// due first; it re-evaluates after every wake-up, because a submission to the
// other lane may be due before the head it was waiting for.
#include "comm/DelayLine.h"

namespace gradzip::comm {

DelayLine::~DelayLine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

DelayLine::Issued DelayLine::submit(Lane lane, Clock::time_point due, Issue issue) {
  Issued issued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = lanes_[static_cast<int>(lane)];
    q.push_back(Entry{due, std::move(issue), {}});
    issued = q.back().result.get_future().share();
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_all();
  return issued;
}

bool DelayLine::busy(Lane lane) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int l = static_cast<int>(lane);
  return issuing_[l] || !lanes_[l].empty();
}

void DelayLine::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    int next = -1;
    for (int l = 0; l < 2; ++l)
      if (!lanes_[l].empty() && (next < 0 || lanes_[l].front().due < lanes_[next].front().due)) next = l;
    if (next < 0) {
      if (stop_) return;  // drained
      cv_.wait(lock);
      continue;
    }
    if (Clock::now() < lanes_[next].front().due) {
      cv_.wait_until(lock, lanes_[next].front().due);
      continue;
    }
    Entry e = std::move(lanes_[next].front());
    lanes_[next].pop_front();
    issuing_[next] = true;
    lock.unlock();
    try {
      e.result.set_value(e.issue());
    } catch (...) {
      e.result.set_exception(std::current_exception());
    }
    lock.lock();
    issuing_[next] = false;
  }
}

}  // namespace gradzip::comm
