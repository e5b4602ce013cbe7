// Implements the topology side of comm/NetEmulator.h: namespace/bridge/veth
// creation through `ip`, entering a rank's namespace, and cleanup by name.
// Every external command goes through runChecked (fork/exec, no shell). The tc
// shaping and the schedule thread live in comm/NetEmulatorShaping.cpp, the
// signal path and removeStale() in comm/NetEmulatorRegistry.cpp, the options'
// YAML in comm/NetEmulatorOptions.cpp.
#include "comm/NetEmulator.h"

#include "comm/Command.h"
#include "comm/NetEmulatorRegistry.h"
#include "util/Error.h"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>

namespace gradzip::comm {

namespace {

constexpr auto kCmdTimeout = std::chrono::seconds(10);

// Effective capability bit `bit` of this process (from /proc/self/status).
bool hasCapability(int bit) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("CapEff:", 0) == 0) {
      unsigned long long caps = std::stoull(line.substr(7), nullptr, 16);
      return (caps >> bit) & 1ULL;
    }
  }
  return false;
}

}  // namespace

std::string NetEmulator::run(const std::vector<std::string>& argv) { return runChecked(argv, kCmdTimeout); }

NetEmulator::NetEmulator(NetEmulatorOptions opts) : opts_(std::move(opts)) {
  GZ_CHECK(opts_.ranks >= 1 && opts_.ranks <= 253, "network emulation: ranks = {} is outside [1, 253]", opts_.ranks);
  {
    int a, b, c;
    char tail;
    GZ_CHECK(std::sscanf(opts_.subnet.c_str(), "%d.%d.%d%c", &a, &b, &c, &tail) == 3 && a >= 0 && a <= 255 &&
                 b >= 0 && b <= 255 && c >= 0 && c <= 255,
             "network emulation: subnet '{}' is not three octets such as 10.213.0", opts_.subnet);
  }
  requirePrivileges();
  static std::atomic<int> instance{0};
  prefix_ = fmt::format("gz{}-{}-", ::getpid(), instance++);
  bridgeNs_ = prefix_ + "br";
  for (int r = 0; r < opts_.ranks; ++r) {
    rankNs_.push_back(fmt::format("{}r{}", prefix_, r));
    addresses_.push_back(fmt::format("{}.{}", opts_.subnet, r + 1));
  }
  detail::registerEmulator(this);
  try {
    create();
    if (opts_.schedule.inEpochs()) {
      std::lock_guard<std::mutex> lock(rateMu_);
      applyRate(opts_.schedule.steps().front().mbit);  // later steps follow the owner's progress source
    } else if (!opts_.schedule.empty()) {
      startSchedule(opts_.schedule);
    }
  } catch (...) {
    detail::unregisterEmulator(this);
    cleanup();
    throw;
  }
  spdlog::info("network emulation: {} ranks in namespaces {}r0..r{} on {}.0/24, rate {}", opts_.ranks, prefix_,
               opts_.ranks - 1, opts_.subnet, opts_.schedule.empty() ? "unshaped" : opts_.schedule.toString());
}

void NetEmulator::requirePrivileges() {
  // CAP_NET_ADMIN = 12, CAP_SYS_ADMIN = 21 (linux/capability.h).
  if (geteuid() != 0 && !(hasCapability(12) && hasCapability(21)))
    throw UserError(
        "network emulation needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN to create network namespaces and shape "
        "links with tc); run as root or skip the emulated-network experiments");
}

NetEmulator::~NetEmulator() {
  detail::unregisterEmulator(this);
  cleanup();
}

void NetEmulator::create() {
  // Each step runs under createdMu_ and is recorded before the lock drops, so a
  // concurrent cleanup() (signal path) sees everything and later steps abort.
  auto step = [&](const std::vector<std::string>& argv, const std::string& ns, const std::string& link) {
    std::lock_guard<std::mutex> lock(createdMu_);
    if (cleanedUp_) throw UserError("network emulation: cleaned up while being created (signal?)");
    run(argv);
    if (link.empty())
      createdNs_.push_back(ns);
    else
      createdLinks_.emplace_back(ns, link);
  };
  auto cmd = [&](const std::vector<std::string>& argv) {
    std::lock_guard<std::mutex> lock(createdMu_);
    if (cleanedUp_) throw UserError("network emulation: cleaned up while being created (signal?)");
    run(argv);
  };
  const std::string mtu = std::to_string(opts_.mtu);
  step({"ip", "netns", "add", bridgeNs_}, bridgeNs_, "");
  step({"ip", "-n", bridgeNs_, "link", "add", "br0", "type", "bridge"}, bridgeNs_, "br0");
  cmd({"ip", "-n", bridgeNs_, "link", "set", "br0", "up"});
  for (int r = 0; r < opts_.ranks; ++r) {
    const std::string& ns = rankNs_[r];
    const std::string port = fmt::format("v{}", r);
    step({"ip", "netns", "add", ns}, ns, "");
    // Created directly with one end in each namespace: nothing appears in the root namespace.
    step({"ip", "-n", ns, "link", "add", kRankInterface, "mtu", mtu, "type", "veth", "peer", "name", port, "mtu", mtu,
          "netns", bridgeNs_},
         bridgeNs_, port);
    cmd({"ip", "-n", bridgeNs_, "link", "set", port, "master", "br0"});
    cmd({"ip", "-n", bridgeNs_, "link", "set", port, "up"});
    cmd({"ip", "-n", ns, "addr", "add", addresses_[r] + "/24", "dev", kRankInterface});
    cmd({"ip", "-n", ns, "link", "set", kRankInterface, "up"});
    cmd({"ip", "-n", ns, "link", "set", "lo", "up"});
  }
}

const std::string& NetEmulator::namespaceName(int rank) const {
  checkRank(rank);
  return rankNs_[rank];
}

const std::string& NetEmulator::address(int rank) const {
  checkRank(rank);
  return addresses_[rank];
}

std::vector<std::string> NetEmulator::execPrefix(int rank) const {
  checkRank(rank);
  return {"ip", "netns", "exec", rankNs_[rank]};
}

std::vector<std::string> NetEmulator::namespaces() const {
  std::vector<std::string> all = rankNs_;
  all.push_back(bridgeNs_);
  return all;
}

void NetEmulator::checkRank(int rank) const {
  GZ_CHECK(rank >= 0 && rank < opts_.ranks, "network emulation: rank {} is outside [0, {})", rank, opts_.ranks);
}

void NetEmulator::runIn(int rank, const std::function<void()>& fn) const {
  checkRank(rank);
  const std::string path = "/var/run/netns/" + rankNs_[rank];
  std::exception_ptr error;
  std::thread t([&] {
    try {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw UserError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
      // setns changes only this thread's network namespace.
      int rc = ::setns(fd, CLONE_NEWNET);
      int err = errno;
      ::close(fd);
      if (rc != 0) throw UserError(fmt::format("setns({}): {}", path, std::strerror(err)));
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

void NetEmulator::cleanup() noexcept {
  try {
    stopSchedule();
  } catch (...) {
  }
  std::lock_guard<std::mutex> lock(createdMu_);
  if (cleanedUp_) return;
  cleanedUp_ = true;
  auto quiet = [](const std::vector<std::string>& argv) {
    try {
      CommandResult r = runCommand(argv, kCmdTimeout);
      if (r.exitCode != 0) spdlog::warn("network emulation cleanup: {} failed: {}", commandLine(argv), r.err);
    } catch (const std::exception& e) {
      spdlog::warn("network emulation cleanup: {}: {}", commandLine(argv), e.what());
    }
  };
  // Links first (deleting one veth end deletes its peer), then namespaces, newest first.
  for (auto it = createdLinks_.rbegin(); it != createdLinks_.rend(); ++it)
    quiet({"ip", "-n", it->first, "link", "del", it->second});
  for (auto it = createdNs_.rbegin(); it != createdNs_.rend(); ++it) quiet({"ip", "netns", "del", *it});
  if (!createdNs_.empty()) spdlog::info("network emulation {}: removed {} namespaces", prefix_, createdNs_.size());
  createdLinks_.clear();
  createdNs_.clear();
}

}  // namespace gradzip::comm
