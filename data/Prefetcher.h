// Background batch production: worker threads build the batches of steps
// [first, end) ahead of the training loop, at most `depth` batches ahead, so a
// step normally finds its batch ready. The consumer gets batches strictly in
// step order whatever the worker scheduling, and learns how long it waited (the
// "data wait" of the per-step time breakdown). An exception thrown while
// producing step s is rethrown to the consumer when it asks for step s.
// Destruction stops the workers and joins them (a batch in progress finishes).
#pragma once

#include "data/Dataset.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace gradzip::data {

class Prefetcher {
 public:
  // Must be thread-safe when workers > 1 and deterministic in `step`.
  using Producer = std::function<Batch(int64_t step)>;

  // depth == 0 produces synchronously inside next() (no threads). Otherwise
  // `workers` >= 1 threads keep up to `depth` steps claimed but not consumed.
  Prefetcher(int64_t first, int64_t end, Producer produce, int depth, int workers);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next step's batch, waiting if it is not ready; nullopt after the last
  // step. Rethrows the producer's exception for that step (and on every call
  // after it: production stops at the first failure).
  std::optional<Batch> next();
  // Seconds the last next() call blocked waiting for a batch (for depth 0: the
  // time it took to produce it), and the sum over all calls.
  double lastWaitSeconds() const { return lastWait_; }
  double totalWaitSeconds() const { return totalWait_; }
  int64_t nextStep() const { return consumed_; }

 private:
  struct Result {
    Batch batch;
    std::exception_ptr error;
  };
  void workerLoop();

  const int64_t end_;
  Producer produce_;
  const int depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Result> ready_;
  int64_t claimed_;   // next step a worker will take
  int64_t consumed_;  // next step the consumer will take
  bool stop_ = false;
  std::exception_ptr failure_;  // the first producer error, rethrown by every later next()
  double lastWait_ = 0, totalWait_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace gradzip::data
