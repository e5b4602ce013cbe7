// Implements comm/EngineAllReduce.h.
#include "comm/EngineAllReduce.h"

#include "comm/Chunking.h"
#include "util/Error.h"

namespace gradzip::comm {

EngineAllReduce::EngineAllReduce(Communicator& comm) : comm_(comm) {}

at::Tensor EngineAllReduce::allReduce(const at::Tensor& input, const Reduction& r) {
  checkCollectiveInput("engine all-reduce", input);
  GZ_CHECK(r.isPlainSum(),
           "engine all-reduce can only sum; reduction {} needs a point-to-point collective (ring, tree or ps)",
           r.name());
  if (input.numel() == 0) return r.lift(input);
  at::Tensor acc = pool_.acquire(input.numel(), input.options().dtype(r.accType(input.scalar_type())));
  r.liftInto(input, acc);
  comm_.allReduce(acc, ReduceOp::Sum).wait();
  return acc;
}

}  // namespace gradzip::comm
