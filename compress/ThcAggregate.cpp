// Implements the collective halves of compress/Thc.h: the parameter-server
// deployment (THC Alg. 2–3 over compress/ShardedExchange.h: b-bit packed
// uplink, integer lookup-and-add at the shard owner, w-bit packed downlink) and
// the all-reduce deployment (end-to-end-utility §3.2.2: saturating b-bit sums
// on packed words through a comm::Collective), on the CPU kernels, and the
// two collectives the device-generic halves (ThcGenericAggregate.cpp) share.
#include "compress/kernels/BitPack.h"
#include "compress/kernels/SaturatingPackedSum.h"
#include "compress/ShardedExchange.h"
#include "compress/Thc.h"
#include "compress/kernels/ThcKernels.h"
#include "compress/kernels/ThcTableKernels.h"
#include "compress/ThcTable.h"
#include "util/Error.h"

namespace gradzip::compress {

at::Tensor Thc::maxOverRanks(at::Tensor norms, Context& ctx) {
  if (ctx.comm.size() > 1) {
    ScopedPhase t(ctx.times, &PhaseTimes::communicate);
    ctx.comm.allReduce(norms, comm::ReduceOp::Max).wait();
    if (ctx.times) ctx.times->bytesSent += norms.numel() * 4;
  }
  return norms;
}

at::Tensor Thc::saturatingSum(const at::Tensor& words, int b, int64_t codes, Context& ctx, int64_t* saturated,
                              at::Tensor* losses) {
  *saturated = 0;
  *losses = at::Tensor();
  if (ctx.comm.size() == 1) return words;
  ScopedPhase t(ctx.times, &PhaseTimes::communicate);
  std::unique_ptr<comm::Collective> owned;
  comm::Collective* coll = ctx.collective;
  if (!coll) {
    owned = comm::makeCollective("ring", ctx.comm);
    coll = owned.get();
  }
  SaturatingPackedSum sat(b, /*recordLosses=*/true);
  at::Tensor summed = coll->allReduce(words, sat);
  if (ctx.times) ctx.times->bytesSent += words.numel() * words.element_size();
  if (sat.clipped() > 0) *losses = sat.losses(summed, codes);
  auto count = at::tensor({sat.clipped()}, at::kLong);
  ctx.comm.allReduce(count, comm::ReduceOp::Sum).wait();
  *saturated = count.item<int64_t>();
  return summed;
}

Aggregated Thc::aggregatePs(const at::Tensor& xIn, Context& ctx) {
  const int n = ctx.comm.size(), me = ctx.comm.rank();
  const int b = bitsFor(n);
  const int g = granularityFor(n);
  const int w = downlinkBits(n);
  const thc::TableLookup& table = tableFor(n);
  const auto x = xIn.cpu().contiguous();
  const auto rht = rotation(x.numel());
  at::Tensor norms;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    norms = blockNorms(x, rht);
  }
  const at::Tensor range = rangeOf(maxOverRanks(norms, ctx), rht);

  at::Tensor codes;
  std::vector<at::Tensor> uplink(n);
  const auto off = shardOffsets(rht.paddedDim() / 8, n);  // shards of whole 8-code groups: b bytes each
  std::vector<int64_t> downBytes(n);
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    codes = rotateQuantizePs(x, range, rht, n, ctx);
    for (int j = 0; j < n; ++j) {
      uplink[j] = codes.narrow(0, off[j] * b, (off[j + 1] - off[j]) * b);  // Alg. 2 line 11: send Z_i (b bits)
      downBytes[j] = packedBytes((off[j + 1] - off[j]) * 8, w);
    }
  }

  std::vector<at::Tensor> down;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::communicate);
    const int64_t myLen = (off[me + 1] - off[me]) * 8;
    // Alg. 2 line 13 at the owner: Y = Σ_i T[Z_i], integers in ⟨n·g+1⟩, sent in w bits.
    auto owner = [&](const std::vector<at::Tensor>& recv) {
      std::vector<int32_t> sum(myLen, 0);
      for (const auto& bytes : recv) {
        const at::Tensor in = bytes.cpu().contiguous();
        GZ_CHECK(in.scalar_type() == at::kByte && in.numel() == packedBytes(myLen, b),
                 "thc: a worker sent {} code bytes for a shard of {} codes (expected {})", in.numel(), myLen,
                 packedBytes(myLen, b));
        thc::addTableValues(in.data_ptr<uint8_t>(), b, myLen, table, sum.data());
      }
      at::Tensor out = at::empty({packedBytes(myLen, w)}, at::kByte);
      packCodes(sum.data(), myLen, w, out.data_ptr<uint8_t>());
      return out;
    };
    down = psExchange(ctx.comm, uplink, owner, downBytes, kPsTag, ctx.times);
  }

  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  // mean = RHT⁻¹(m + (Y/n)·(M − m)/g) (Alg. 2 lines 16–17); localApplied = RHT⁻¹(X_i).
  float* v = rotated_.data();
  for (int j = 0; j < n; ++j) {
    const int64_t len = (off[j + 1] - off[j]) * 8;
    const at::Tensor in = down[j].cpu().contiguous();
    GZ_CHECK(in.scalar_type() == at::kByte && in.numel() == packedBytes(len, w),
             "thc: shard owner {} returned {} sum bytes for {} coordinates (expected {})", j, in.numel(), len,
             packedBytes(len, w));
    thc::dequantizeSums(in.data_ptr<uint8_t>(), w, off[j] * 8, len, rht.blockSize(), range.data_ptr<float>(), n, g,
                        v + off[j] * 8);
  }
  Aggregated r;
  r.mean = inverseOfRotated(rht, ctx.sharedSeed(), meanCache_).to(xIn.device());
  thc::dequantizeCodes(codes.data_ptr<uint8_t>(), b, rht.paddedDim(), rht.blockSize(), range.data_ptr<float>(), table,
                       v);
  r.localApplied = inverseOfRotated(rht, ctx.sharedSeed(), appliedCache_).to(xIn.device());
  return r;
}

Aggregated Thc::aggregateAllReduce(const at::Tensor& xIn, Context& ctx) {
  const int n = ctx.comm.size();
  const int b = fieldBits();
  const auto x = xIn.cpu().contiguous();
  const auto rht = rotation(x.numel());
  at::Tensor norms, words;
  {
    // Block norms (the rotation keeps them, THC §5.2 opt. 1); rejects
    // non-finite x before anything is sent.
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    norms = blockNorms(x, rht);
  }
  const at::Tensor range = rangeOf(maxOverRanks(norms, ctx), rht);
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    words = thc::rotateQuantizePack(x.data_ptr<float>(), range.data_ptr<float>(), rht, options_.bits, b,
                                    ctx.sharedSeed(), ctx.privateSeed(), scratch_, wordCache_);
  }

  int64_t saturated = 0;
  at::Tensor losses;
  const at::Tensor summed = saturatingSum(words, b, rht.paddedDim(), ctx, &saturated, &losses);

  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  Aggregated r;
  // mean = RHT⁻¹((S/n)·(M/L)); localApplied = RHT⁻¹((C_i − Λ_i)·(M/L)), Λ_i
  // the clip losses of this rank's combines (Thc.h), by linearity of RHT⁻¹.
  r.mean = thc::unpackInverse(summed, range.data_ptr<float>(), rht, options_.bits, b, n, ctx.sharedSeed(), scratch_,
                              meanCache_)
               .to(xIn.device());
  if (losses.defined()) {
    // This rank clipped something: its codes less its losses, one inverse rotation.
    const at::Tensor applied = SaturatingPackedSum::unpack(words, b, rht.paddedDim()).sub_(losses);
    r.localApplied = rht.inverse(dequantizeSum(applied, range, rht, 1), ctx.sharedSeed()).to(xIn.device());
  } else {
    r.localApplied = thc::unpackInverse(words, range.data_ptr<float>(), rht, options_.bits, b, 1, ctx.sharedSeed(),
                                        scratch_, appliedCache_)
                         .to(xIn.device());
  }
  r.saturated = saturated;
  return r;
}

Aggregated Thc::aggregateAllReduceMax(const at::Tensor& xIn, Context& ctx) {
  const int n = ctx.comm.size();
  const int b = fieldBits();
  const auto x = xIn.cpu().contiguous();
  const auto rht = rotation(x.numel());
  at::Tensor rotated, maxima;
  {
    // §3.2.2: rotate first, then the value range of each block; the workers
    // share M = the largest |R| any of them has there (all-reduce MAX), so the
    // codes of every worker are on one grid and nothing is clamped.
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    rotated = rht.forward(x, ctx.sharedSeed());
    maxima = blockMaxima(rotated, rht);
  }
  const at::Tensor range = maxOverRanks(maxima, ctx);
  Quantized q;
  at::Tensor words;
  {
    ScopedPhase t(ctx.times, &PhaseTimes::encode);
    q = quantize(rotated, range, rht, ctx.privateSeed());
    words = SaturatingPackedSum::pack(q.codes, b);
  }
  int64_t saturated = 0;
  at::Tensor losses;
  const at::Tensor summed = saturatingSum(words, b, rht.paddedDim(), ctx, &saturated, &losses);

  ScopedPhase t(ctx.times, &PhaseTimes::decode);
  Aggregated r;
  const auto sums = SaturatingPackedSum::unpack(summed, b, rht.paddedDim());
  r.mean = rht.inverse(dequantizeSum(sums, range, rht, n), ctx.sharedSeed()).to(xIn.device());
  if (losses.defined()) q.values.sub_(dequantizeSum(losses, range, rht, 1));  // X_i − Λ_i·(M/L)
  r.localApplied = rht.inverse(q.values, ctx.sharedSeed()).to(xIn.device());
  r.saturated = saturated;
  return r;
}

}  // namespace gradzip::compress
