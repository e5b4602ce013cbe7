// Implements launch/EmulatedLaunch.h: the emulator around launch(), and for
// schedules in epochs the progress file that connects rank 0's training loop
// to the emulator's rate thread.
#include "launch/EmulatedLaunch.h"

#include "launch/ProgressFile.h"
#include "util/Error.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

namespace gradzip::trainer {
namespace {

// A private directory for the progress file, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gradzip-progress-XXXXXX").string();
    GZ_CHECK(::mkdtemp(tmpl.data()) != nullptr, "launch: cannot create a directory for the progress file ({}): {}",
             tmpl, std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

LaunchResult launchEmulated(LaunchOptions o, comm::NetEmulatorOptions net) {
  comm::NetEmulator::requirePrivileges();
  if (const int stale = comm::NetEmulator::removeStale(); stale > 0)
    spdlog::info("launch: removed {} namespace(s) left by an earlier, killed emulated run", stale);
  net.ranks = o.nprocs;
  const std::string rates = net.schedule.empty() ? "unshaped" : net.schedule.toString();
  std::optional<TempDir> progressDir;
  // A one-step schedule never changes rate: nothing to follow.
  if (net.schedule.inEpochs() && net.schedule.steps().size() > 1) progressDir.emplace();
  comm::NetEmulator emu(net);  // applies the schedule's first rate; the destructor removes everything
  o.masterAddr = emu.address(0);
  o.rankPrefix.clear();
  for (int r = 0; r < o.nprocs; ++r) o.rankPrefix.push_back(emu.execPrefix(r));
  o.env.push_back("GRADZIP_NETWORK=" + rates);
  // Inside a namespace only eth0 reaches the other ranks. gradzip picks the
  // address towards MASTER_ADDR itself, but PyTorch's Gloo (the DDP peer arms)
  // would bind the hostname's address, 127.0.0.1, and never connect.
  o.env.push_back(std::string("GLOO_SOCKET_IFNAME=") + comm::NetEmulator::kRankInterface);
  auto seen = std::make_shared<std::atomic<bool>>(false);
  if (progressDir) {
    const std::string file = progressDir->path() + "/progress";
    o.env.push_back(std::string(kProgressFileEnv) + "=" + file);
    // Polled as often as rank 0 writes it.
    emu.followSchedule(
        net.schedule,
        [file, seen]() -> std::optional<double> {
          auto epoch = readProgressFile(file);
          if (epoch) seen->store(true);
          return epoch;
        },
        kProgressInterval);
  }
  spdlog::info("launch: emulated network {} ({} ranks on bridge {}x, rate schedule {} Mbit/s{}; no latency shaping)",
               emu.prefix(), o.nprocs, net.subnet, rates,
               progressDir ? ", following the epoch rank 0 writes to $" + std::string(kProgressFileEnv) : "");
  const LaunchResult rc = launch(o);
  emu.stopSchedule();
  if (progressDir && !seen->load())
    spdlog::warn("launch: the rate schedule is in epochs, but no rank wrote ${} (gradzip train does; other programs "
                 "must write it themselves), so the rate stayed at the first step's",
                 kProgressFileEnv);
  return rc;
}

LaunchResult launchOn(const LaunchOptions& o, const std::optional<comm::NetEmulatorOptions>& net) {
  return net ? launchEmulated(o, *net) : launch(o);
}

}  // namespace gradzip::trainer
