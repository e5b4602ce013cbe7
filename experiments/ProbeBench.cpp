// `gradzip bench probe`: connects through the torchrun environment, runs the
// ping-pong network probe (comm/NetworkProbe.h) and, on rank 0, prints α (µs),
// β (s/B) and the bandwidth (Mbit/s) as one table line plus one JSON line, the
// JSON also appended to --out when given. Run it under `gradzip launch -n 2` or
// inside emulated namespaces (comm/NetEmulator.h).
#include "comm/NetworkProbe.h"
#include "comm/Rendezvous.h"
#include "experiments/Benchmarks.h"
#include "util/Error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

namespace gradzip::experiments {

int benchProbe(const BenchProbeArgs& args) {
  auto comm = comm::connect(comm::RendezvousOptions::fromEnv());
  GZ_CHECK(comm->size() >= 2, "bench probe needs at least 2 ranks (run it under `gradzip launch -n 2`), got {}",
           comm->size());
  const comm::ProbeOptions opts;
  const comm::ProbeResult r = comm::probeNetwork(*comm, opts);
  if (comm->rank() != 0) return 0;

  const double mbit = comm::bandwidthBitsPerSec(r.params) / 1e6;
  std::cout << fmt::format("{:>12} {:>14} {:>16} {:>6} {:>10}\n", "alpha_us", "beta_s_per_B", "bandwidth_Mbit",
                           "sizes", "seconds");
  std::cout << fmt::format("{:>12.2f} {:>14.5g} {:>16.2f} {:>6} {:>10.2f}\n", r.params.alpha * 1e6, r.params.beta,
                           mbit, r.sizes.size(), r.probeSeconds);
  nlohmann::json j;
  j["bench"] = "probe";
  j["world_size"] = comm->size();
  j["backend"] = comm->backendName();
  j["alpha_us"] = r.params.alpha * 1e6;
  j["beta_s_per_byte"] = r.params.beta;
  j["bandwidth_mbit"] = mbit;
  j["send_delay_us"] = comm->sendDelay().count();
  j["sizes"] = r.sizes;
  j["median_half_rtt_us"] = nlohmann::json::array();
  for (double s : r.medianSeconds) j["median_half_rtt_us"].push_back(s * 1e6);
  j["repeats"] = r.repeats;
  j["probe_seconds"] = r.probeSeconds;
  const std::string line = j.dump();
  std::cout << line << "\n" << std::flush;
  if (!args.out.empty()) {
    std::ofstream f(args.out, std::ios::app);
    GZ_CHECK(f.good(), "bench probe: cannot open --out file '{}'", args.out);
    f << line << "\n";
    GZ_CHECK(f.good(), "bench probe: cannot write to --out file '{}'", args.out);
  }
  return 0;
}

}  // namespace gradzip::experiments
