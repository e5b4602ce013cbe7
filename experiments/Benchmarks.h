// Benchmarks reachable from the CLI (`gradzip bench ...`). They print ratios
// measured side by side in one run and append JSON lines to a results file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::experiments {

struct BenchCollectivesArgs {
  int64_t minBytes = 4 << 10;
  int64_t maxBytes = 64 << 20;
  int repeats = 5;
  std::string out;  // JSON lines appended here by rank 0 (empty: print only)
};
// Ring, tree and PS all-reduce (float sum) against c10d's Gloo all-reduce for
// float tensors from minBytes to maxBytes (powers of 4); run under launch.
int benchCollectives(const BenchCollectivesArgs& args);

struct BenchCompressorsArgs {
  std::vector<std::string> compressors;  // empty = every registered compressor
  int minLog2 = 16;                      // d from 2^minLog2 ...
  int maxLog2 = 24;                      // ... to 2^maxLog2
  int repeats = 3;
  std::string out;  // JSON lines appended here (empty: print only)
};
// Single-core encode+decode throughput (GB/s of fp32 input) of each compressor
// next to memcpy bandwidth measured in the same run, with vNMSE and bits per
// coordinate on a fixed synthetic gradient.
int benchCompressors(const BenchCompressorsArgs& args);

struct BenchProbeArgs {
  std::string out;  // JSON line appended here by rank 0 (empty: print only)
};
// Ping-pong probe of α (latency) and β (seconds per byte) between the ranks
// (run under launch or inside emulated namespaces).
int benchProbe(const BenchProbeArgs& args);

}  // namespace gradzip::experiments
