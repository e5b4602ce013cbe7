// Implements comm/NetEmulatorRegistry.h and the process-wide parts of
// NetEmulator: installSignalCleanup (a mutex-guarded set of live emulators, a
// self-pipe written by the signal handler, and a detached watcher thread that
// cleans up and re-raises) and removeStale (namespaces of dead processes).
#include "comm/NetEmulatorRegistry.h"

#include "comm/Command.h"
#include "comm/NetEmulator.h"
#include "util/Error.h"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

namespace gradzip::comm {

namespace {

std::mutex& registryMutex() {
  static std::mutex mu;
  return mu;
}
std::set<NetEmulator*>& registry() {
  static std::set<NetEmulator*> live;
  return live;
}

int gSignalPipe[2] = {-1, -1};

extern "C" void onTerminatingSignal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!::write(gSignalPipe[1], &b, 1);
  errno = saved;
}

void watchSignals() {
  unsigned char b = 0;
  while (true) {
    ssize_t n = ::read(gSignalPipe[0], &b, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return;  // pipe broken: nothing more to watch
  }
  const int sig = b;
  const int n = detail::cleanupAllEmulators();
  spdlog::warn("signal {}: removed the namespaces of {} network emulator(s)", sig, n);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

namespace detail {

void registerEmulator(NetEmulator* e) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().insert(e);
}

void unregisterEmulator(NetEmulator* e) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().erase(e);
}

int cleanupAllEmulators() noexcept {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (NetEmulator* e : registry()) e->cleanup();
  return static_cast<int>(registry().size());
}

}  // namespace detail

void NetEmulator::installSignalCleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (::pipe2(gSignalPipe, O_CLOEXEC) != 0)
      throw UserError(fmt::format("cannot create the signal pipe: {}", std::strerror(errno)));
    std::thread(watchSignals).detach();
    struct sigaction sa {};
    sa.sa_handler = onTerminatingSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
  });
}

int NetEmulator::removeStale() {
  std::istringstream list(runChecked({"ip", "netns", "list"}));
  std::string line;
  int removed = 0;
  while (std::getline(list, line)) {
    const std::string name = line.substr(0, line.find(' '));
    long pid = 0;
    char dash = 0;
    if (std::sscanf(name.c_str(), "gz%ld%c", &pid, &dash) != 2 || dash != '-' || pid <= 0) continue;
    if (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (runCommand({"ip", "netns", "del", name}).exitCode == 0) ++removed;
  }
  return removed;
}

}  // namespace gradzip::comm
