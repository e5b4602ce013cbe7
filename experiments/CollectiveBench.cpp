// `gradzip bench collectives`: placeholder until comm/ collectives land.
#include "experiments/Benchmarks.h"

#include "util/Error.h"

namespace gradzip::experiments {
int benchCollectives(const BenchCollectivesArgs&) { throw UserError("bench collectives: not built yet"); }
}  // namespace gradzip::experiments
