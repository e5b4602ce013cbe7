// `gradzip train CONFIG`: loads the config, joins the ranks (torchrun, SLURM
// or `gradzip launch` environment) and runs the Trainer.
#include "cli/Commands.h"

#include "comm/Rendezvous.h"
#include "trainer/RunDirectory.h"
#include "trainer/Trainer.h"
#include "util/Error.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace gradzip::trainer {

int trainCommand(const TrainArgs& args) {
  auto cfg = TrainConfig::load(args.config, args.overrides);
  if (cfg.network && !std::getenv("GRADZIP_NETWORK"))
    throw UserError(fmt::format(
        "{}: the network block (emulated links) is set up by `gradzip launch -n N {}` or `gradzip compare`, which "
        "run each rank in its own network namespace; under torchrun or SLURM remove the block",
        args.config, args.config));
  auto ro = comm::RendezvousOptions::fromEnv(std::chrono::seconds(cfg.comm.timeoutS));
  ro.fingerprint = cfg.fingerprint();
  ro.cudaBackend = cfg.comm.cudaBackend;
  auto comm = comm::connect(ro);
  comm->setSendDelay(std::chrono::microseconds(cfg.comm.latencyUs));
  prepareRunDirectory(cfg, *comm,
                      args.resume ? RunStart::Resume : args.overwrite ? RunStart::Overwrite : RunStart::Fresh);
  Trainer trainer(cfg, *comm);
  auto result = trainer.run(args.resume);
  std::string m;
  for (const auto& [k, v] : result.finalMetrics) m += fmt::format(" {} {:.4f}", k, v);
  spdlog::info("done: {} steps, {:.1f} s of training{}{}", result.steps, result.trainSeconds, m,
               result.earlyStopped ? " (early stopped)" : "");
  return 0;
}

}  // namespace gradzip::trainer
