// Implements the collective halves of THC's device-generic path (compress/Thc.h,
// compress/CodecPath.h): both deployments' aggregate in ATen operations on
// x's device, through the same collectives as the CPU path (ThcAggregate.cpp:
// the norm round, the saturating all-reduce, the sharded parameter server of
// compress/ShardedExchange.h), with the codec pieces of ThcGeneric.cpp.
// Whatever a collective hands back is moved to x's device before use.
#include "compress/Thc.h"

#include "compress/ShardedExchange.h"
#include "compress/kernels/BitPack.h"
#include "compress/kernels/BitPackGeneric.h"
#include "compress/kernels/HadamardGeneric.h"
#include "util/Error.h"

#include <vector>

namespace gradzip::compress {

Aggregated Thc::aggregatePsGeneric(const at::Tensor& xIn, Context& ctx) {
  const int n = ctx.comm.size(), me = ctx.comm.rank();
  const int b = bitsFor(n);
  const int g = granularityFor(n);
  const int w = downlinkBits(n);
  const thc::TableLookup& table = tableFor(n);
  const at::Tensor x = xIn.contiguous();
  const at::Device dev = x.device();
  const auto rht = rotation(x.numel());
  at::Tensor norms;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    norms = blockNormsGeneric(x, rht);
  }
  const at::Tensor range = rangeOf(maxOverRanks(norms, ctx), rht).to(dev);

  at::Tensor codes;
  std::vector<at::Tensor> uplink(n);
  const auto off = shardOffsets(rht.paddedDim() / 8, n);  // shards of whole 8-code groups: b bytes each
  std::vector<int64_t> downBytes(n);
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    const at::Tensor rotated = generic::rhtForward(rht, x, ctx.sharedSeed());
    codes = tableCodesGeneric(rotated, range, rht, table, ctx.privateSeed());
    const at::Tensor packed = generic::packBits(codes, b, /*checked=*/false);
    for (int j = 0; j < n; ++j) {
      uplink[j] = packed.narrow(0, off[j] * b, (off[j + 1] - off[j]) * b);  // Alg. 2 line 11: send Z_i (b bits)
      downBytes[j] = packedBytes((off[j + 1] - off[j]) * 8, w);
    }
  }

  std::vector<at::Tensor> down;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::communicate);
    const int64_t myLen = (off[me + 1] - off[me]) * 8;
    const at::Tensor ints = at::tensor(table.ints, at::kInt).to(at::kLong).to(dev);
    // Alg. 2 line 13 at the owner: Y = Σ_i T[Z_i], integers in ⟨n·g+1⟩, sent in w bits.
    auto owner = [&](const std::vector<at::Tensor>& recv) {
      at::Tensor sum = at::zeros({myLen}, x.options().dtype(at::kLong));
      for (const auto& bytes : recv) {
        GZ_CHECK(bytes.scalar_type() == at::kByte && bytes.numel() == packedBytes(myLen, b),
                 "thc: a worker sent {} code bytes for a shard of {} codes (expected {})", bytes.numel(), myLen,
                 packedBytes(myLen, b));
        const at::Tensor z = generic::unpackBits(bytes.to(dev).contiguous(), b, myLen, at::kLong);
        sum.add_(ints.index_select(0, z));
      }
      return generic::packBits(sum, w, /*checked=*/false);
    };
    down = psExchange(ctx.comm, uplink, owner, downBytes, kPsTag, ctx.times);
  }

  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  // mean = RHT⁻¹(m + (Y/n)·(M − m)/g) (Alg. 2 lines 16–17); localApplied = RHT⁻¹(X_i).
  std::vector<at::Tensor> sums(n);
  for (int j = 0; j < n; ++j) {
    const int64_t len = (off[j + 1] - off[j]) * 8;
    GZ_CHECK(down[j].scalar_type() == at::kByte && down[j].numel() == packedBytes(len, w),
             "thc: shard owner {} returned {} sum bytes for {} coordinates (expected {})", j, down[j].numel(), len,
             packedBytes(len, w));
    sums[j] = generic::unpackBits(down[j].to(dev).contiguous(), w, len, at::kInt);
  }
  Aggregated r;
  r.mean = generic::rhtInverse(rht, sumValuesGeneric(at::cat(sums), range, rht, n, g), ctx.sharedSeed());
  r.localApplied = generic::rhtInverse(rht, tableValuesGeneric(codes, range, rht, table), ctx.sharedSeed());
  return r;
}

Aggregated Thc::aggregateAllReduceGeneric(const at::Tensor& xIn, Context& ctx) {
  const int n = ctx.comm.size();
  const int b = fieldBits();
  const at::Tensor x = xIn.contiguous();
  const at::Device dev = x.device();
  const auto rht = rotation(x.numel());
  at::Tensor rotated, range;
  {
    // range: norm: the block norms (THC Alg. 3; the rotation keeps them).
    // range: max (§3.2.2): the value range of each rotated block; the workers
    // share the largest |R| any of them has there, so nothing is clamped.
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    rotated = generic::rhtForward(rht, x, ctx.sharedSeed());
    range = maxRange() ? blockMaxima(rotated, rht) : blockNormsGeneric(x, rht);
  }
  range = maxOverRanks(range, ctx);
  range = (maxRange() ? range : rangeOf(range, rht)).to(dev);
  at::Tensor codes, words;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    codes = quantizeGeneric(rotated, range, rht, ctx.privateSeed());
    words = packWordsGeneric(codes, b);
  }
  int64_t saturated = 0;
  at::Tensor losses;
  const at::Tensor summed = saturatingSum(words, b, rht.paddedDim(), ctx, &saturated, &losses);

  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  Aggregated r;
  // mean = RHT⁻¹((S/n)·(M/L)); localApplied = RHT⁻¹((C_i − Λ_i)·(M/L)), Λ_i
  // the clip losses of this rank's combines (Thc.h), by linearity of RHT⁻¹.
  const at::Tensor sums = unpackWordsGeneric(summed.to(dev), b, rht.paddedDim());
  r.mean = generic::rhtInverse(rht, dequantizeSumGeneric(sums, range, rht, n), ctx.sharedSeed());
  at::Tensor applied;
  if (!losses.defined()) {
    applied = dequantizeSumGeneric(codes, range, rht, 1);
  } else if (maxRange()) {  // X_i − Λ_i·(M/L), as aggregateAllReduceMax rounds it
    applied = dequantizeSumGeneric(codes, range, rht, 1).sub_(dequantizeSumGeneric(losses.to(dev), range, rht, 1));
  } else {  // (C_i − Λ_i)·(M/L), as aggregateAllReduce rounds it
    applied = dequantizeSumGeneric(codes - losses.to(dev), range, rht, 1);
  }
  r.localApplied = generic::rhtInverse(rht, applied, ctx.sharedSeed());
  r.saturated = saturated;
  return r;
}

}  // namespace gradzip::compress
