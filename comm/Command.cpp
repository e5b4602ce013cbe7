// Implements comm/Command.h: fork/execvp with stdout and stderr on pipes, read
// with poll() until both close or the deadline passes, then waitpid.
#include "comm/Command.h"

#include "util/Error.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gradzip::comm {

namespace {

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

std::string commandLine(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a.find(' ') == std::string::npos ? a : "'" + a + "'";
  }
  return s;
}

CommandResult runCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  GZ_ASSERT(!argv.empty(), "runCommand needs a program");
  int outPipe[2], errPipe[2];
  if (::pipe2(outPipe, O_CLOEXEC) != 0) throw UserError(fmt::format("pipe: {}", std::strerror(errno)));
  if (::pipe2(errPipe, O_CLOEXEC) != 0) {
    ::close(outPipe[0]);
    ::close(outPipe[1]);
    throw UserError(fmt::format("pipe: {}", std::strerror(errno)));
  }
  // Build argv before fork: the child of a multithreaded parent may only call
  // async-signal-safe functions (no allocation).
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) throw UserError(fmt::format("cannot fork to run '{}': {}", commandLine(argv), std::strerror(errno)));
  if (pid == 0) {
    ::dup2(outPipe[1], STDOUT_FILENO);
    ::dup2(errPipe[1], STDERR_FILENO);
    int devNull = ::open("/dev/null", O_RDONLY);
    if (devNull >= 0) ::dup2(devNull, STDIN_FILENO);
    ::execvp(cargv[0], cargv.data());
    const char msg[] = "exec failed: program not found or not executable\n";
    (void)!::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(outPipe[1]);
  ::close(errPipe[1]);

  CommandResult r;
  int fds[2] = {outPipe[0], errPipe[0]};
  std::string* sinks[2] = {&r.out, &r.err};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (fds[0] >= 0 || fds[1] >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timedOut = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p[2];
    int n = 0;
    for (int i = 0; i < 2; ++i)
      if (fds[i] >= 0) p[n++] = pollfd{fds[i], POLLIN, 0};
    int rc = ::poll(p, n, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) break;
    for (int j = 0; j < n; ++j) {
      if (!(p[j].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int i = p[j].fd == fds[0] ? 0 : 1;
      ssize_t got = ::read(fds[i], buf, sizeof(buf));
      if (got > 0)
        sinks[i]->append(buf, static_cast<size_t>(got));
      else if (got == 0 || errno != EINTR)
        closeFd(fds[i]);
    }
  }
  closeFd(fds[0]);
  closeFd(fds[1]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exitCode = exitCodeOf(status);
  return r;
}

std::string runChecked(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  CommandResult r = runCommand(argv, timeout);
  if (r.timedOut)
    throw UserError(fmt::format("command timed out after {} ms: {}", timeout.count(), commandLine(argv)));
  if (r.exitCode != 0) {
    std::string err = r.err;
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    throw UserError(fmt::format("command failed (exit {}): {}: {}", r.exitCode, commandLine(argv),
                                err.empty() ? "(no stderr)" : err));
  }
  return r.out;
}

}  // namespace gradzip::comm
