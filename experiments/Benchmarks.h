// Benchmarks reachable from the CLI (`gradzip bench ...`). They print ratios
// measured side by side in one run and append JSON lines to a results file.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace gradzip::experiments
