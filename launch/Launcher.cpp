// Implements launch/Launcher.h with fork/exec, a blocked signal set and
// sigtimedwait, so that child exits and user signals are handled in one loop
// without async-signal-safety pitfalls.
#include "launch/Launcher.h"

#include "util/Error.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <optional>

namespace gradzip::trainer {

int pickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  GZ_CHECK(fd >= 0, "launch: socket() failed: {}", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw UserError(fmt::format("launch: cannot find a free port: {}", std::strerror(errno)));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

namespace {

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "unknown status";
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// gradzip's exit code for a communication failure (cli/main.cpp). A rank
// usually fails that way because a peer failed first (its cause: a bad
// checkpoint, a config error), and the peer may exit a moment later.
constexpr int kCommFailureExit = 3;
// How long a communication failure waits for another rank's own failure
// before it is reported as the cause.
constexpr auto kSettle = std::chrono::seconds(2);

struct Failure {
  int rank;
  int status;
};

}  // namespace

LaunchResult launch(const LaunchOptions& o) {
  GZ_CHECK(o.nprocs >= 1, "launch: -n must be at least 1, got {}", o.nprocs);
  GZ_CHECK(!o.command.empty(), "launch: no command given");
  const int port = o.masterPort > 0 ? o.masterPort : pickFreePort();

  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, &old);
  const pid_t parent = getpid();

  std::vector<pid_t> pids(o.nprocs, -1);
  for (int r = 0; r < o.nprocs; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      for (int k = 0; k < r; ++k) kill(pids[k], SIGKILL);
      sigprocmask(SIG_SETMASK, &old, nullptr);
      throw UserError(fmt::format("launch: fork failed: {}", std::strerror(errno)));
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the launcher died before prctl
      sigprocmask(SIG_SETMASK, &old, nullptr);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(o.nprocs).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(o.nprocs).c_str(), 1);
      setenv("MASTER_ADDR", o.masterAddr.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      for (const auto& kv : o.env) putenv(const_cast<char*>(kv.c_str()));
      std::vector<char*> argv;
      if (r < static_cast<int>(o.rankPrefix.size()))
        for (const auto& a : o.rankPrefix[r]) argv.push_back(const_cast<char*>(a.c_str()));
      for (const auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      fprintf(stderr, "gradzip launch: rank %d: cannot execute '%s': %s\n", r, argv[0], std::strerror(errno));
      _exit(127);
    }
    pids[r] = pid;
  }
  spdlog::info("launched {} ranks (MASTER_ADDR={} MASTER_PORT={}): {}", o.nprocs, o.masterAddr, port,
               fmt::join(o.command, " "));

  int running = o.nprocs;
  int result = 0, interruptedBy = 0;
  bool stopping = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  auto stopAll = [&](int sig) {
    for (int r = 0; r < o.nprocs; ++r)
      if (pids[r] > 0) kill(pids[r], sig);
    if (!stopping) deadline = std::chrono::steady_clock::now() + o.grace;
    stopping = true;
  };
  // The first communication failure, held for kSettle while another rank's
  // own failure may still arrive: that one is the cause to report.
  std::optional<Failure> pending;
  auto pendingUntil = std::chrono::steady_clock::time_point::max();
  auto fail = [&](Failure f) {
    result = exitCodeOf(f.status);
    const bool followed = pending && pending->rank != f.rank;
    spdlog::error("launch: rank {} failed with {}{}; stopping the other ranks", f.rank, describeStatus(f.status),
                  followed ? fmt::format(" (rank {}'s {}, a communication failure, followed from it)",
                                         pending->rank, describeStatus(pending->status))
                           : "");
    pending.reset();
    stopAll(SIGTERM);
  };

  while (running > 0) {
    timespec ts{0, 200 * 1000 * 1000};
    siginfo_t info;
    int sig = sigtimedwait(&set, &info, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      spdlog::warn("launch: received {}; stopping all ranks", strsignal(sig));
      interruptedBy = sig;
      if (result == 0) result = 128 + sig;
      pending.reset();
      stopAll(sig == SIGINT ? SIGINT : SIGTERM);
    }
    // Reap every child that has exited (SIGCHLD may coalesce).
    for (;;) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      int rank = -1;
      for (int r = 0; r < o.nprocs; ++r)
        if (pids[r] == pid) rank = r;
      if (rank < 0) continue;
      pids[rank] = -1;
      --running;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      const bool commFailure = WIFEXITED(status) && WEXITSTATUS(status) == kCommFailureExit;
      if (!ok && result == 0 && commFailure && !pending) {
        pending = Failure{rank, status};
        pendingUntil = std::chrono::steady_clock::now() + kSettle;
      } else if (!ok && result == 0 && !commFailure) {
        fail(Failure{rank, status});
      } else if (!ok) {
        spdlog::debug("launch: rank {} ended with {}", rank, describeStatus(status));
      }
    }
    if (pending && (running == 0 || std::chrono::steady_clock::now() > pendingUntil)) fail(*pending);
    if (stopping && running > 0 && std::chrono::steady_clock::now() > deadline) {
      spdlog::warn("launch: {} rank(s) still running after the grace period; killing them", running);
      stopAll(SIGKILL);
      deadline = std::chrono::steady_clock::time_point::max();
    }
  }
  sigprocmask(SIG_SETMASK, &old, nullptr);
  return {result, interruptedBy};
}

}  // namespace gradzip::trainer
