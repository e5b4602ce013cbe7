// Implements tests/testing/ThreadGroup.h.
#include "tests/testing/ThreadGroup.h"

#include "comm/ProcessGroupCommunicator.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace gradzip::testing {

void runRanks(int n, const std::function<void(comm::Communicator&)>& fn, std::chrono::milliseconds timeout,
              bool stageCuda) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(timeout);
  std::mutex mu;
  std::string firstError;
  std::vector<std::thread> threads;
  // Groups outlive every rank's fn: a rank that finishes first must not close
  // its connections while a peer still reads from them.
  std::vector<c10::intrusive_ptr<c10d::ProcessGroupGloo>> groups(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, r, n, opts);
        {
          std::lock_guard<std::mutex> lock(mu);
          groups[r] = gloo;
        }
        comm::ProcessGroupCommunicator comm(gloo, {}, r, n, timeout, stageCuda);
        fn(comm);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (firstError.empty()) firstError = "rank " + std::to_string(r) + ": " + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (!firstError.empty()) throw std::runtime_error(firstError);
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "gradzip-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace gradzip::testing
