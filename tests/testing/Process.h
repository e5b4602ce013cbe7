// Test helper: runs the gradzip binary (or any shell command) as a child
// process with a deadline, for tests of the CLI, the launcher and emulated
// networks. A command that outlives its deadline is killed with its whole
// process group, so a hang fails the test instead of CI.
#pragma once

#include <chrono>
#include <string>

namespace gradzip::testing {

// $GRADZIP_BINARY (set by CTest to the built gradzip), or "" when unset.
std::string gradzipBinary();

struct Output {
  int status = -1;   // exit code; 128 + signal when killed by one; -2 on timeout
  std::string text;  // stdout and stderr, interleaved
};

// Runs `cmd` with /bin/sh in a new process group.
Output runCommand(const std::string& cmd, std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace gradzip::testing
