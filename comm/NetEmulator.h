// Network emulation with Linux namespaces (DESIGN.md §8). Each rank gets its own
// network namespace with one interface ("eth0", address 10.213.0.<rank+1>/24 by
// default), joined by a veth pair to a bridge that lives in a further namespace
// of its own, so the root namespace is never touched. Every link is shaped with
// a tc token bucket filter (tbf) in BOTH directions: on the rank's eth0 (rank ->
// bridge) and on the bridge's port (bridge -> rank); a message between two
// ranks therefore crosses two buckets of the same rate. Rates follow a
// RateSchedule applied by a background thread (`tc qdisc replace`, or deletion
// of the root qdisc for "unshaped"): at its times for a schedule in seconds, or
// by polling a progress callback (the training epoch) for one in epochs.
//
// Latency: this kernel has no netem, so there is no tc delay or loss. gradzip
// emulates latency inside its communicator, one delay per message round of
// every plan, the engine's collectives included (Communicator::setSendDelay);
// the α-β cost model extends results to other latencies. Say which one a
// result used.
//
// Rates are of Ethernet frames as tc counts them: TCP over a 1500-byte MTU
// carries 1448 payload bytes per 1514-byte frame, so application goodput is
// about 95.6% of the configured rate (the goodput measured against that bound:
// experiments/results/network_emulation.md, "Goodput").
//
// Names derive from a per-process, per-instance prefix "gz<pid>-<k>-" so
// concurrent runs never collide; cleanup() deletes every link and namespace this
// object created, by name, and runs from the destructor, on a failed
// construction, and (after installSignalCleanup()) on SIGINT/SIGTERM. Needs root
// (CAP_NET_ADMIN and CAP_SYS_ADMIN); otherwise the constructor throws UserError.
#pragma once

#include "comm/RateSchedule.h"
#include "util/Yaml.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gradzip::comm {

struct NetEmulatorOptions {
  int ranks = 2;
  // First three octets of the private /24; rank r gets .(r+1). Namespaces
  // isolate it, so concurrent emulators may share it.
  std::string subnet = "10.213.0";
  int mtu = 1500;
  // tbf bucket size as time at the configured rate (at least 4 frames). A
  // bucket lets its size through at line speed, which bends t(M) = α + Mβ for
  // messages near it and misleads the probe, so keep it small; 1 ms, because
  // much smaller buckets lose rate at 1000 Mbit/s
  // (experiments/results/network_emulation.md, "Bucket size").
  double burstMillis = 1.0;
  // tbf queue bound, as the longest time a packet may wait (tc "latency").
  double queueMillis = 50.0;
  // Applied from construction (t = 0 at construction); empty = unshaped. A
  // schedule in epochs gets only its first rate at construction; the owner
  // starts followSchedule() with a progress source.
  RateSchedule schedule;

  static NetEmulatorOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& n) const;
};

class NetEmulator {
 public:
  // Creates the namespaces, bridge, veth pairs and addresses, applies the
  // schedule's first rate and starts its thread. Throws UserError without root,
  // or naming the failing command; anything created so far is removed first.
  explicit NetEmulator(NetEmulatorOptions opts);
  ~NetEmulator();
  NetEmulator(const NetEmulator&) = delete;
  NetEmulator& operator=(const NetEmulator&) = delete;

  // The interface of every rank's namespace (besides lo).
  static constexpr const char* kRankInterface = "eth0";

  int size() const { return opts_.ranks; }
  const std::string& prefix() const { return prefix_; }
  // The namespace of rank r, e.g. "gz4242-0-r1".
  const std::string& namespaceName(int rank) const;
  // Rank r's IPv4 address (reachable from every other rank's namespace).
  const std::string& address(int rank) const;
  // The command prefix that runs a program inside rank r's namespace:
  // {"ip", "netns", "exec", NAME}; append the program and its arguments.
  std::vector<std::string> execPrefix(int rank) const;
  // Every namespace created (ranks, then the bridge's), for checks.
  std::vector<std::string> namespaces() const;

  // Stops any running schedule and sets every link to `mbit` (nullopt =
  // unshaped) now. Throws UserError naming the tc command on failure.
  void setRate(std::optional<double> mbit);
  // Stops any running schedule, applies s.steps()[0] now (errors throw) and
  // the later steps from a background thread at their times after this call.
  // Errors in the thread are logged and kept (lastScheduleError()).
  void startSchedule(const RateSchedule& s);
  // For a schedule in epochs: stops any running schedule, applies
  // s.steps()[0] now (errors throw), then polls `progress` every `poll` from a
  // background thread and applies s.rateAt(epoch) whenever that differs from
  // the rate in force. `progress` returns the current epoch, or nullopt while
  // there is none yet (the rate stays); it runs on the background thread and
  // must not throw. Errors applying a rate are logged and kept.
  using ProgressFn = std::function<std::optional<double>()>;
  void followSchedule(const RateSchedule& s, ProgressFn progress,
                      std::chrono::milliseconds poll = std::chrono::milliseconds(200));
  void stopSchedule();
  // The rate in force (nullopt = unshaped).
  std::optional<double> currentRate() const;
  std::string lastScheduleError() const;

  // Runs fn on a new thread that has entered rank r's network namespace
  // (setns), waits for it and rethrows its exception. Sockets fn opens live in
  // that namespace; threads fn starts inherit it.
  void runIn(int rank, const std::function<void()>& fn) const;

  // Deletes every link and namespace this object created, by name; safe to call
  // more than once and from any thread; never throws (failures are logged).
  void cleanup() noexcept;

  // Throws UserError (the message says what is missing) unless this process
  // may create namespaces and shape links: root, or CAP_NET_ADMIN and
  // CAP_SYS_ADMIN.
  static void requirePrivileges();

  // Makes SIGINT and SIGTERM clean up every live NetEmulator of this process,
  // then terminate with the signal's default action. Idempotent.
  static void installSignalCleanup();
  // Deletes namespaces named "gz<pid>-..." whose process no longer exists
  // (leftovers of a SIGKILLed run). Returns how many were removed.
  static int removeStale();

 private:
  // An `ip` or `tc` command through runChecked (comm/Command.h) with the
  // emulator's command timeout: stdout, or UserError on a failure or timeout.
  static std::string run(const std::vector<std::string>& argv);
  void create();
  void applyRate(std::optional<double> mbit);  // caller holds rateMu_
  void scheduleLoop(RateSchedule s, std::chrono::steady_clock::time_point t0);
  void followLoop(RateSchedule s, ProgressFn progress, std::chrono::milliseconds poll);
  void checkRank(int rank) const;

  NetEmulatorOptions opts_;
  std::string prefix_;
  std::string bridgeNs_;
  std::vector<std::string> rankNs_;
  std::vector<std::string> addresses_;

  std::mutex createdMu_;
  std::vector<std::string> createdNs_;                           // in creation order
  std::vector<std::pair<std::string, std::string>> createdLinks_;  // (namespace, device)
  bool cleanedUp_ = false;

  mutable std::mutex rateMu_;
  std::optional<double> rate_;
  bool shaped_ = false;
  std::string scheduleError_;

  std::mutex threadMu_;
  std::condition_variable stopCv_;
  bool stop_ = false;
  std::thread scheduleThread_;
};

}  // namespace gradzip::comm
