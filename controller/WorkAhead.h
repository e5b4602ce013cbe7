// Runs fn(0), ..., fn(n − 1) on worker threads that each take the next index
// from a shared counter (so a few slow items do not leave a worker idle):
// `background` of them start at construction, and the thread that calls
// finish() works as one more until every index is taken, then waits for the
// rest. The controller's rank 0 screens the candidate codecs this way: on a
// background thread while it waits on the link (the provisional step's β
// soundings), and on the cores the other ranks of its host leave idle while
// they wait for its decision (controller/Screening.h, `screen_threads`).
// Each index runs exactly once, on whichever thread takes it, so results
// written to slot i of a vector sized n do not depend on the thread count.
// An exception escaping fn stops the thread it ran on (the others go on with
// the remaining indices) and is rethrown by finish() once every worker has
// stopped; the destructor logs it instead.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <future>
#include <vector>

namespace gradzip::trainer {

class WorkAhead {
 public:
  WorkAhead(size_t n, int background, std::function<void(size_t)> fn);
  // Finishes the work (finish()) if the owner has not.
  ~WorkAhead();
  WorkAhead(const WorkAhead&) = delete;
  WorkAhead& operator=(const WorkAhead&) = delete;

  // Starts background workers until `background` of them have been started
  // (none once every index is taken).
  void ensureWorkers(int background);
  // Items completed so far, by any thread.
  size_t done() const { return done_.load(); }
  size_t size() const { return n_; }
  // The calling thread takes indices until none is left, then waits for the
  // background workers' last items. Idempotent.
  void finish();

 private:
  void work();

  const size_t n_;
  std::function<void(size_t)> fn_;
  std::atomic<size_t> next_{0};
  std::atomic<size_t> done_{0};
  std::vector<std::future<void>> workers_;
};

}  // namespace gradzip::trainer
