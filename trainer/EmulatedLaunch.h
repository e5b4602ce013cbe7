// `gradzip launch` on an emulated network: every rank runs in its own network
// namespace of a comm::NetEmulator (a bridge, tc tbf shaping each link in both
// directions, a rate schedule over time since the launch), rank 0's namespace
// address is the rendezvous address, and every namespace and link is removed
// when the launch ends: normally, on a failed rank, on Ctrl-C/SIGTERM (the
// launcher forwards them and returns), or, for a SIGKILLed launcher, by the next
// emulated launch (NetEmulator::removeStale). Latency is not shaped here (no
// netem on this kernel): comm.latency_us delays gradzip's own messages instead.
#pragma once

#include "comm/NetEmulator.h"
#include "trainer/Launcher.h"

#include <optional>

namespace gradzip::trainer {

// Runs launch(o) with o.nprocs ranks inside a NetEmulator configured by `net`
// (its `ranks` is set to o.nprocs). Each rank gets GRADZIP_NETWORK (the
// schedule, e.g. "0:20") in its environment. Throws UserError without the
// privileges to create namespaces. Returns launch()'s status.
int launchEmulated(LaunchOptions o, comm::NetEmulatorOptions net);

// launchEmulated when `net` is set, plain launch() otherwise.
int launchOn(const LaunchOptions& o, const std::optional<comm::NetEmulatorOptions>& net);

}  // namespace gradzip::trainer
