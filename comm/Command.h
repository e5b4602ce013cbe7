// Running an external command (ip, tc) synchronously through fork/exec, never
// through a shell: arguments are passed as a vector, so no quoting or injection
// is possible. Output is captured; a command that fails or outlives its timeout
// becomes an exception naming the command line and its stderr. Used by the
// namespace network emulator (comm/NetEmulator.h).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gradzip::comm {

struct CommandResult {
  int exitCode = -1;       // exit status, or 128 + signal when killed by a signal
  std::string out;         // captured stdout
  std::string err;         // captured stderr
  bool timedOut = false;   // killed because it outlived the timeout
};

// Runs argv[0] (looked up in PATH) with argv[1..]; waits at most `timeout`,
// then SIGKILLs it. Never throws for a non-zero exit; throws UserError if the
// process cannot be started at all. argv must not be empty.
CommandResult runCommand(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(20));

// As runCommand, but a non-zero exit or a timeout throws UserError:
//   command failed (exit 2): tc qdisc replace dev eth0 ...: <stderr>
// Returns stdout.
std::string runChecked(const std::vector<std::string>& argv,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20));

// "a b c" for messages (arguments containing spaces are quoted).
std::string commandLine(const std::vector<std::string>& argv);

}  // namespace gradzip::comm
