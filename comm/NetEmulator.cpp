// Implements comm/NetEmulator.h: namespace/bridge/veth creation through `ip`,
// tbf shaping through `tc`, the schedule thread, and cleanup by name. Every
// external command goes through runChecked (fork/exec, no shell). The signal
// path and removeStale() live in comm/NetEmulatorRegistry.cpp, the options'
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

constexpr int64_t kMinBurstBytes = 4 * 1514;  // a few full frames, else tbf drops
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

std::string run(const std::vector<std::string>& argv) { return runChecked(argv, kCmdTimeout); }

}  // namespace

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

void NetEmulator::applyRate(std::optional<double> mbit) {
  // Both directions of every link: rank -> bridge on the rank's eth0, bridge ->
  // rank on the bridge's port.
  std::vector<std::pair<std::string, std::string>> devices;
  for (int r = 0; r < opts_.ranks; ++r) {
    devices.emplace_back(rankNs_[r], kRankInterface);
    devices.emplace_back(bridgeNs_, fmt::format("v{}", r));
  }
  if (!mbit) {
    if (shaped_)
      for (const auto& [ns, dev] : devices) run({"tc", "-n", ns, "qdisc", "del", "dev", dev, "root"});
    shaped_ = false;
    rate_ = std::nullopt;
    return;
  }
  GZ_CHECK(*mbit >= RateSchedule::kMinMbit && *mbit <= RateSchedule::kMaxMbit,
           "network emulation: rate {} Mbit/s is outside [{}, {}]", *mbit, RateSchedule::kMinMbit,
           RateSchedule::kMaxMbit);
  const double bitsPerSec = *mbit * 1e6;
  const int64_t burst =
      std::max<int64_t>(kMinBurstBytes, static_cast<int64_t>(std::llround(bitsPerSec / 8.0 * opts_.burstMillis / 1e3)));
  const std::string rate = fmt::format("{}bit", static_cast<int64_t>(std::llround(bitsPerSec)));
  const std::string latency = fmt::format("{}us", static_cast<int64_t>(std::llround(opts_.queueMillis * 1e3)));
  for (const auto& [ns, dev] : devices)
    run({"tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", std::to_string(burst),
         "latency", latency});
  shaped_ = true;
  rate_ = mbit;
}

void NetEmulator::setRate(std::optional<double> mbit) {
  stopSchedule();
  std::lock_guard<std::mutex> lock(rateMu_);
  applyRate(mbit);
  spdlog::info("network emulation {}: rate {}", prefix_, mbit ? fmt::format("{} Mbit/s", *mbit) : "unshaped");
}

void NetEmulator::startSchedule(const RateSchedule& s) {
  GZ_CHECK(!s.empty(), "network emulation: empty rate schedule");
  GZ_CHECK(!s.inEpochs(), "network emulation: the schedule {} is in epochs; it needs a progress source (followSchedule)",
           s.toString());
  stopSchedule();
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(rateMu_);
    applyRate(s.steps().front().mbit);
  }
  if (s.steps().size() > 1) {
    std::lock_guard<std::mutex> lock(threadMu_);
    stop_ = false;
    scheduleThread_ = std::thread([this, s, t0] { scheduleLoop(s, t0); });
  }
}

void NetEmulator::scheduleLoop(RateSchedule s, std::chrono::steady_clock::time_point t0) {
  for (size_t i = 1; i < s.steps().size(); ++i) {
    const auto& step = s.steps()[i];
    const auto at = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(step.start));
    {
      std::unique_lock<std::mutex> lock(threadMu_);
      if (stopCv_.wait_until(lock, at, [this] { return stop_; })) return;
    }
    std::lock_guard<std::mutex> lock(rateMu_);
    try {
      applyRate(step.mbit);
      spdlog::info("network emulation {}: t={} s rate {}", prefix_, step.start,
                   step.mbit ? fmt::format("{} Mbit/s", *step.mbit) : "unshaped");
    } catch (const std::exception& e) {
      scheduleError_ = e.what();
      spdlog::error("network emulation {}: schedule step at {} s failed: {}", prefix_, step.start, e.what());
    }
  }
}

void NetEmulator::followSchedule(const RateSchedule& s, ProgressFn progress, std::chrono::milliseconds poll) {
  GZ_CHECK(!s.empty(), "network emulation: empty rate schedule");
  GZ_CHECK(poll.count() > 0, "network emulation: poll interval must be positive");
  stopSchedule();
  {
    std::lock_guard<std::mutex> lock(rateMu_);
    applyRate(s.steps().front().mbit);
  }
  if (s.steps().size() > 1) {
    std::lock_guard<std::mutex> lock(threadMu_);
    stop_ = false;
    scheduleThread_ = std::thread([this, s, progress = std::move(progress), poll] { followLoop(s, progress, poll); });
  }
}

void NetEmulator::followLoop(RateSchedule s, ProgressFn progress, std::chrono::milliseconds poll) {
  // The rate the schedule last asked for; a failed change is not retried every
  // poll, only when the epoch moves to a step with another rate.
  std::optional<double> asked = s.steps().front().mbit;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(threadMu_);
      if (stopCv_.wait_for(lock, poll, [this] { return stop_; })) return;
    }
    const std::optional<double> epoch = progress();
    if (!epoch) continue;
    const std::optional<double> want = s.rateAt(*epoch);
    if (want == asked) continue;
    asked = want;
    std::lock_guard<std::mutex> lock(rateMu_);
    try {
      applyRate(want);
      spdlog::info("network emulation {}: epoch {:.3f} rate {}", prefix_, *epoch,
                   want ? fmt::format("{} Mbit/s", *want) : "unshaped");
    } catch (const std::exception& e) {
      scheduleError_ = e.what();
      spdlog::error("network emulation {}: schedule step at epoch {:.3f} failed: {}", prefix_, *epoch, e.what());
    }
  }
}

void NetEmulator::stopSchedule() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(threadMu_);
    stop_ = true;
    t = std::move(scheduleThread_);
  }
  stopCv_.notify_all();
  if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
  if (t.joinable()) t.detach();
}

std::optional<double> NetEmulator::currentRate() const {
  std::lock_guard<std::mutex> lock(rateMu_);
  return rate_;
}

std::string NetEmulator::lastScheduleError() const {
  std::lock_guard<std::mutex> lock(rateMu_);
  return scheduleError_;
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
