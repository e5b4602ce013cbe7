// `gradzip bench compressors`: placeholder until the compressors land.
#include "experiments/Benchmarks.h"

#include "util/Error.h"

namespace gradzip::experiments {
int benchCompressors(const BenchCompressorsArgs&) { throw UserError("bench compressors: not built yet"); }
}  // namespace gradzip::experiments
