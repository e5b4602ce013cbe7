// Test helper: runs one function per rank on threads, each rank holding a real
// ProcessGroupGloo over loopback (rendezvous through an in-process HashStore, as
// c10d's own ProcessGroupGlooTest does), with a short timeout so a hang fails
// fast. Failures on any rank are rethrown on the calling thread with the rank.
#pragma once

#include "comm/Communicator.h"

#include <chrono>
#include <functional>

namespace gradzip::testing {

// Calls fn(comm) on `n` threads (n >= 1; n == 1 still uses a real Gloo group).
// Throws the first failure, prefixed with "rank R: ". `stageCuda`: CUDA
// tensors go through Gloo as host copies (`comm.cuda_backend: gloo`).
void runRanks(int n, const std::function<void(comm::Communicator&)>& fn,
              std::chrono::milliseconds timeout = std::chrono::seconds(20), bool stageCuda = false);

// A fresh, empty temporary directory removed at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace gradzip::testing
