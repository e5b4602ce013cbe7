// Implements controller/WorkAhead.h with std::async threads and an atomic index.
#include "controller/WorkAhead.h"

#include <spdlog/spdlog.h>

#include <exception>

namespace gradzip::trainer {

WorkAhead::WorkAhead(size_t n, int background, std::function<void(size_t)> fn) : n_(n), fn_(std::move(fn)) {
  ensureWorkers(background);
}

void WorkAhead::ensureWorkers(int background) {
  while (int(workers_.size()) < background && next_.load() < n_)
    workers_.push_back(std::async(std::launch::async, [this] { work(); }));
}

WorkAhead::~WorkAhead() {
  try {
    finish();
  } catch (const std::exception& e) {
    spdlog::error("background work failed after its owner stopped waiting for it: {}", e.what());
  }
}

void WorkAhead::work() {
  for (size_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) {
    fn_(i);
    done_.fetch_add(1);
  }
}

void WorkAhead::finish() {
  // Every worker is waited for before the first error is rethrown, so that
  // none outlives the state fn reads.
  std::exception_ptr error;
  try {
    work();
  } catch (...) {
    error = std::current_exception();
  }
  for (auto& w : workers_) {
    try {
      w.get();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  workers_.clear();
  if (error) std::rethrow_exception(error);
}

}  // namespace gradzip::trainer
