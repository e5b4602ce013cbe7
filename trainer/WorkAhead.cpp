// Implements trainer/WorkAhead.h with std::async threads and an atomic index.
#include "trainer/WorkAhead.h"

namespace gradzip::trainer {

WorkAhead::WorkAhead(size_t n, int background, std::function<void(size_t)> fn) : n_(n), fn_(std::move(fn)) {
  addWorkers(background);
}

void WorkAhead::addWorkers(int more) {
  for (int t = 0; t < more && next_.load() < n_; ++t)
    workers_.push_back(std::async(std::launch::async, [this] { work(); }));
}

WorkAhead::~WorkAhead() { finish(); }

void WorkAhead::work() {
  for (size_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) {
    fn_(i);
    done_.fetch_add(1);
  }
}

void WorkAhead::finish() {
  work();
  for (auto& w : workers_) w.get();
  workers_.clear();
}

}  // namespace gradzip::trainer
