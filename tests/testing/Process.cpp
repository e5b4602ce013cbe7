// Implements tests/testing/Process.h.
#include "tests/testing/Process.h"

#include "tests/testing/ThreadGroup.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace gradzip::testing {

std::string gradzipBinary() {
  const char* b = std::getenv("GRADZIP_BINARY");
  return b ? b : "";
}

Output runCommand(const std::string& cmd, std::chrono::seconds timeout) {
  TempDir dir;
  const std::string out = dir.path() + "/out.txt";
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", (cmd + " >" + out + " 2>&1").c_str(), (char*)nullptr);
    _exit(127);
  }
  Output o;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      o.status = -2;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a child's exit, not synchronising with it
  }
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  o.text = ss.str();
  return o;
}

}  // namespace gradzip::testing
