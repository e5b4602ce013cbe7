// Implements data/Prefetcher.h with a mutex/condition-variable bounded window.
#include "data/Prefetcher.h"

#include "util/Error.h"

#include <chrono>

namespace gradzip::data {

Prefetcher::Prefetcher(int64_t first, int64_t end, Producer produce, int depth, int workers)
    : end_(end), produce_(std::move(produce)), depth_(depth), claimed_(first), consumed_(first) {
  GZ_CHECK(depth >= 0, "prefetch depth must be >= 0, got {}", depth);
  GZ_CHECK(depth == 0 || workers >= 1, "data workers must be >= 1, got {}", workers);
  if (depth_ == 0) return;
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { workerLoop(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void Prefetcher::workerLoop() {
  while (true) {
    int64_t step;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || claimed_ >= end_ || claimed_ < consumed_ + depth_; });
      if (stop_ || claimed_ >= end_) return;
      step = claimed_++;
    }
    Result r;
    try {
      r.batch = produce_(step);
    } catch (...) {
      r.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_.emplace(step, std::move(r));
    }
    cv_.notify_all();
  }
}

std::optional<Batch> Prefetcher::next() {
  auto start = std::chrono::steady_clock::now();
  auto finish = [&] {
    lastWait_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    totalWait_ += lastWait_;
  };
  // After a failure the workers have stopped: report it again rather than wait forever.
  if (failure_) std::rethrow_exception(failure_);
  if (depth_ == 0) {
    if (consumed_ >= end_) return std::nullopt;
    try {
      Batch b = produce_(consumed_++);
      finish();
      return b;
    } catch (...) {
      failure_ = std::current_exception();
      throw;
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (consumed_ >= end_) return std::nullopt;
  cv_.wait(lock, [&] { return ready_.count(consumed_) > 0; });
  auto node = ready_.extract(consumed_);
  ++consumed_;
  if (node.mapped().error) {
    stop_ = true;  // produce nothing more after a failure
    failure_ = node.mapped().error;
  }
  lock.unlock();
  cv_.notify_all();  // a window slot is free
  finish();
  if (node.mapped().error) std::rethrow_exception(node.mapped().error);
  return std::move(node.mapped().batch);
}

}  // namespace gradzip::data
