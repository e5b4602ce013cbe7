// The process-wide registry of live NetEmulators and the SIGINT/SIGTERM path
// that cleans them up (NetEmulator::installSignalCleanup). A signal handler may
// only call async-signal-safe functions, so it just writes the signal number to
// a pipe; a watcher thread reads it, runs cleanup() of every registered
// emulator (fork/exec of `ip`), restores the default action and re-raises the
// signal so the process ends as it would have.
#pragma once

namespace gradzip::comm {
class NetEmulator;
namespace detail {

// Called by NetEmulator's constructor (before it creates anything) and
// destructor (before it cleans up), so the watcher never sees a dead object.
void registerEmulator(NetEmulator* e);
void unregisterEmulator(NetEmulator* e);
// cleanup() of every registered emulator; returns how many.
int cleanupAllEmulators() noexcept;

}  // namespace detail
}  // namespace gradzip::comm
