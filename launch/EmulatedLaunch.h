// `gradzip launch` on an emulated network: every rank runs in its own network
// namespace of a comm::NetEmulator (a bridge, tc tbf shaping each link in both
// directions, a rate schedule over seconds since the launch or over training
// epochs), rank 0's namespace address is the rendezvous address, and every
// namespace and link is removed when the launch ends: normally, on a failed
// rank, on Ctrl-C/SIGTERM (the launcher forwards them and returns), or, for a
// SIGKILLed launcher, by the next emulated launch (NetEmulator::removeStale).
// Latency is not shaped here (no netem on this kernel): comm.latency_us delays
// gradzip's own messages instead.
#pragma once

#include "comm/NetEmulator.h"
#include "launch/Launcher.h"

#include <optional>

namespace gradzip::trainer {

// Runs launch(o) with o.nprocs ranks inside a NetEmulator configured by `net`
// (its `ranks` is set to o.nprocs). Each rank gets GRADZIP_NETWORK (the
// schedule, e.g. "0:20" or "0e:50,2e:10") in its environment. For a schedule in
// epochs the ranks also get GRADZIP_PROGRESS_FILE (launch/ProgressFile.h), a
// file in a private temporary directory that rank 0 of `gradzip train` keeps
// at the current epoch; the launcher polls it every kProgressInterval (as
// often as rank 0 writes it) and applies the rate of that epoch, and removes
// the directory at the end. Throws UserError without the privileges to create
// namespaces. Returns launch()'s result.
LaunchResult launchEmulated(LaunchOptions o, comm::NetEmulatorOptions net);

// launchEmulated when `net` is set, plain launch() otherwise.
LaunchResult launchOn(const LaunchOptions& o, const std::optional<comm::NetEmulatorOptions>& net);

}  // namespace gradzip::trainer
