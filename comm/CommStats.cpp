// Implements comm/CommStats.h.
#include "comm/CommStats.h"

namespace gradzip::comm {

void CommStats::record(const std::string& op, int64_t bytesSent, int64_t bytesReceived, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& c = ops_[op];
  c.calls += 1;
  c.bytesSent += bytesSent;
  c.bytesReceived += bytesReceived;
  c.seconds += seconds;
}

OpCounters CommStats::get(const std::string& op) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ops_.find(op);
  return it == ops_.end() ? OpCounters{} : it->second;
}

OpCounters CommStats::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  OpCounters t;
  for (const auto& [name, c] : ops_) {
    t.calls += c.calls;
    t.bytesSent += c.bytesSent;
    t.bytesReceived += c.bytesReceived;
    t.seconds += c.seconds;
  }
  return t;
}

std::map<std::string, OpCounters> CommStats::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_;
}

void CommStats::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  ops_.clear();
}

}  // namespace gradzip::comm
