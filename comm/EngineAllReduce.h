// The communication engine's own all-reduce (c10d Gloo or NCCL) behind the
// Collective interface, so plain sums can be measured against, and replaced
// by, gradzip's point-to-point algorithms (DESIGN.md §4: the faster one wins).
// It can only sum: the reduction must be a plain sum (Reduction::isPlainSum:
// floatSum or wideIntSum); the lifted accumulator is what goes on the wire.
#pragma once

#include "comm/BufferPool.h"
#include "comm/Collective.h"

namespace gradzip::comm {

class EngineAllReduce final : public Collective {
 public:
  explicit EngineAllReduce(Communicator& comm);
  std::string name() const override { return "engine"; }
  // Collective.h contract; UserError naming the reduction unless r.isPlainSum().
  // The result comes from a BufferPool.
  at::Tensor allReduce(const at::Tensor& input, const Reduction& r) override;

 private:
  Communicator& comm_;
  BufferPool pool_;
};

}  // namespace gradzip::comm
