// `gradzip bench probe`: placeholder until comm/NetworkProbe lands.
#include "experiments/Benchmarks.h"

#include "util/Error.h"

namespace gradzip::experiments {
int benchProbe(const BenchProbeArgs&) { throw UserError("bench probe: not built yet"); }
}  // namespace gradzip::experiments
