// `gradzip launch`: starts N local ranks with the torchrun environment (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), forwards
// Ctrl-C/SIGTERM to them, and when any rank fails stops the others (SIGTERM,
// then SIGKILL after a grace period) and reports the failing rank's status.
// A rank that fails with a communication error (exit code 3) is usually
// reacting to another rank's failure, so the launcher waits a moment for a
// rank with another exit status and reports that one as the cause.
// Children die with the launcher (PR_SET_PDEATHSIG), so none is left behind.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gradzip::trainer {

struct LaunchOptions {
  int nprocs = 2;
  std::vector<std::string> command;  // argv of every rank
  std::string masterAddr = "127.0.0.1";
  int masterPort = 0;  // 0 = pick a free port
  std::chrono::milliseconds grace{5000};
  // Extra variables for every rank, "NAME=value".
  std::vector<std::string> env;
  // Per rank, argv words put before `command` (e.g. {"ip", "netns", "exec",
  // NS} to run the rank in a network namespace); empty = none.
  std::vector<std::vector<std::string>> rankPrefix;
};

// What launch() ended with.
struct LaunchResult {
  // 0 when all ranks succeed, the first failing rank's exit code (or 128 +
  // signal) otherwise, 128 + signal when interrupted.
  int status = 0;
  // The signal (SIGINT, SIGTERM or SIGHUP) the launcher received and stopped
  // its ranks for, or 0. A rank killed by a signal has a status of 128 +
  // signal too, so only this tells the two apart. A caller that runs several
  // launches (gradzip compare) must stop there: launch() takes those signals
  // itself, so the caller would otherwise go on to its next launch.
  int interruptedBy = 0;
};

// Runs the ranks to completion.
LaunchResult launch(const LaunchOptions& opts);

// A free TCP port on 127.0.0.1 (bind to port 0, read it back, close).
int pickFreePort();

}  // namespace gradzip::trainer
