// Per-operation counters of a Communicator: calls, bytes sent and received, and
// seconds from issue to completion (as observed by wait()). Thread-safe; the
// network probe and the cost model fit α and β from these observations.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace gradzip::comm {

struct OpCounters {
  int64_t calls = 0;
  int64_t bytesSent = 0;
  int64_t bytesReceived = 0;
  double seconds = 0.0;
};

class CommStats {
 public:
  // Adds one completed operation named `op` (e.g. "allreduce", "send").
  void record(const std::string& op, int64_t bytesSent, int64_t bytesReceived, double seconds);
  OpCounters get(const std::string& op) const;
  OpCounters total() const;
  std::map<std::string, OpCounters> snapshot() const;
  void reset();

 private:
  mutable std::mutex mu_;
  std::map<std::string, OpCounters> ops_;
};

}  // namespace gradzip::comm
