// Shared helpers for the compressor tests of compress helper 1 (fp32/fp16/bf16,
// TopK family, PowerSGD, ErrorFeedback): deterministic per-rank inputs that
// every rank can recompute for all ranks (so homomorphism checks need no extra
// communication), bit-identity checks across ranks, and vNMSE.
#pragma once

#include "comm/Collective.h"
#include "comm/Communicator.h"
#include "comm/LocalCommunicator.h"
#include "compress/Compressor.h"
#include "compress/Factory.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <sstream>

namespace gradzip::testing {

// Rank r's gradient for (seed, step): N(0, 1) coordinates from a generator
// seeded by (seed, rank, step), so any rank can reproduce any other's input.
inline at::Tensor gaussianInput(int64_t d, int rank, uint64_t seed, int64_t step = 0) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003ULL + 7919ULL * rank + 104729ULL * step);
  return at::randn({d}, gen, at::kFloat);
}

// Small integers times 2^-4 (|v| <= 64): sums of up to 2^10 of them are exact
// in float in any order, so different summation orders agree bit for bit.
inline at::Tensor dyadicInput(int64_t d, int rank, uint64_t seed, int64_t step = 0) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003ULL + 7919ULL * rank + 104729ULL * step);
  return at::randint(-1024, 1025, {d}, gen, at::kFloat).div_(16);
}

// A spatially correlated vector: a random walk whose step sizes are large in a
// few blocks (a "blocky" gradient, as layers with large gradients are).
inline at::Tensor blockyInput(int64_t d, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor scale = at::exp(at::randn({(d + 255) / 256}, gen, at::kFloat).mul_(2.0))
                         .repeat_interleave(256)
                         .narrow(0, 0, d);
  return at::randn({d}, gen, at::kFloat).cumsum(0).mul_(scale).div_(std::sqrt(static_cast<double>(d)));
}

// Every rank's tensor, stacked in rank order.
inline at::Tensor gatherRanks(comm::Communicator& c, const at::Tensor& t) {
  std::vector<at::Tensor> out(c.size());
  for (auto& o : out) o = at::empty_like(t);
  c.allGather(out, t.contiguous()).wait();
  return at::stack(out);
}

inline double vnmse(const at::Tensor& truth, const at::Tensor& estimate) {
  return (truth - estimate).square().sum().item<double>() / truth.square().sum().item<double>();
}

// Every rank's `t` must equal rank 0's bit for bit (compared as raw bytes).
inline void expectIdenticalAcrossRanks(comm::Communicator& c, const at::Tensor& t) {
  at::Tensor mine = t.contiguous().view({-1});
  std::vector<at::Tensor> all(c.size());
  for (auto& a : all) a = at::empty_like(mine);
  c.allGather(all, mine).wait();
  for (int r = 1; r < c.size(); ++r)
    EXPECT_EQ(std::memcmp(all[0].data_ptr(), all[r].data_ptr(), mine.numel() * mine.element_size()), 0)
        << "rank " << r << " differs from rank 0";
}

// `from`'s checkpoint state loaded into `to` through a serialized archive, as a
// checkpoint file carries it.
inline void checkpointRoundTrip(const compress::Compressor& from, compress::Compressor& to) {
  torch::serialize::OutputArchive out;
  from.save(out);
  std::stringstream buf;
  out.save_to(buf);
  torch::serialize::InputArchive in;
  in.load_from(buf);
  to.load(in);
}

inline bool bitEqual(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.numel() == 0) return true;  // memcmp must not see the null data pointer of an empty tensor
  return std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.numel() * a.element_size()) == 0;
}

// A Context on `c` with every field spelled out (engine all-reduce, seed 0).
inline compress::Context contextFor(comm::Communicator& c) {
  return compress::Context{c, nullptr, "engine", {}, 0, 0, 0, nullptr};
}

// A Context for `c` with the named collective ("engine" = ctx.collective null).
struct CtxHolder {
  std::unique_ptr<comm::Collective> collective;
  compress::Context ctx;
  CtxHolder(comm::Communicator& c, const std::string& coll, uint64_t seed = 42)
      : collective(coll == "engine" ? nullptr : comm::makeCollective(coll, c)), ctx(contextFor(c)) {
    ctx.collective = collective.get();
    ctx.collectiveName = coll;
    ctx.seed = seed;
  }
};

// The claim a deterministic codec makes about its two implementations
// (compress/CodecPath.h): `name` with options `yaml`, built once per path,
// puts the same bits on the wire for x and decodes them to the same floats.
// Checks `steps` calls in a row, so per-bucket state (PowerSGD's Q) is
// compared too.
inline void expectSameBitsOnBothPaths(const std::string& name, const std::string& yaml, const at::Tensor& x,
                                      int steps = 1) {
  comm::LocalCommunicator local;
  auto fast = compress::makeCompressor(name, yaml + "\ncodec: auto");
  auto generic = compress::makeCompressor(name, yaml + "\ncodec: generic");
  for (int step = 0; step < steps; ++step) {
    compress::Context cf = contextFor(local), cg = contextFor(local);
    cf.step = cg.step = step;
    const compress::Payload pf = fast->encode(x, cf), pg = generic->encode(x, cg);
    ASSERT_EQ(pf.tensors.size(), pg.tensors.size()) << name << " " << yaml;
    for (size_t i = 0; i < pf.tensors.size(); ++i)
      EXPECT_TRUE(bitEqual(pf.tensors[i], pg.tensors[i])) << name << " " << yaml << ": payload tensor " << i << " step " << step;
    EXPECT_TRUE(bitEqual(fast->decode(pf, x.numel(), cf), generic->decode(pg, x.numel(), cg)))
        << name << " " << yaml << ": decoded, step " << step;
  }
}

}  // namespace gradzip::testing
