// Implements trainer/EmulatedLaunch.h.
#include "trainer/EmulatedLaunch.h"

#include "util/Error.h"

#include <spdlog/spdlog.h>

namespace gradzip::trainer {

int launchEmulated(LaunchOptions o, comm::NetEmulatorOptions net) {
  comm::NetEmulator::requirePrivileges();
  if (const int stale = comm::NetEmulator::removeStale(); stale > 0)
    spdlog::info("launch: removed {} namespace(s) left by an earlier, killed emulated run", stale);
  net.ranks = o.nprocs;
  const std::string rates = net.schedule.empty() ? "unshaped" : net.schedule.toString();
  comm::NetEmulator emu(net);  // applies the schedule's first rate; the destructor removes everything
  o.masterAddr = emu.address(0);
  o.rankPrefix.clear();
  for (int r = 0; r < o.nprocs; ++r) o.rankPrefix.push_back(emu.execPrefix(r));
  o.env.push_back("GRADZIP_NETWORK=" + rates);
  spdlog::info("launch: emulated network {} ({} ranks on bridge {}x, rate schedule {} Mbit/s; no latency shaping)",
               emu.prefix(), o.nprocs, net.subnet, rates);
  return launch(o);
}

int launchOn(const LaunchOptions& o, const std::optional<comm::NetEmulatorOptions>& net) {
  return net ? launchEmulated(o, *net) : launch(o);
}

}  // namespace gradzip::trainer
