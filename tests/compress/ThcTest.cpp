// Tests compress/Thc single-worker: wire size, the NMSE of THC (4, 30, 1/32) on
// log-normal input, encode/decode = aggregate with n = 1, options, errors and
// checkpoints, and the device-generic codec path against the CPU kernels
// (the same wire format, the same codes wherever the block norms round
// alike; on a GPU: tests/gpu/GpuThcTest.cpp). Multi-rank
// behaviour is in ThcAggregateTest.cpp; the fused codecs
// against the step-by-step pipeline in kernels/ThcKernelsTest.cpp.
#include "compress/Thc.h"

#include "comm/LocalCommunicator.h"
#include "compress/Factory.h"
#include "compress/ThcTable.h"
#include "compress/kernels/Hadamard.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/compress/kernels/SimdLevels.h"
#include "util/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace gradzip::compress {
namespace {

ThcOptions psOptions() { return ThcOptions{}; }

TEST(Thc, WireSizeEqualsDeclaredBits) {
  comm::LocalCommunicator local;
  Context ctx{local};
  for (const char* dep : {"ps", "allreduce", "allreduce-max"})
    for (int bits : {2, 3, 4, 8})
      for (int64_t d : {1, 10, 1000, 4096}) {
        ThcOptions o;
        o.deployment = std::string(dep) == "ps" ? "ps" : "allreduce";
        if (std::string(dep) == "allreduce-max") o.range = "max";
        o.bits = bits;
        o.granularity = 0;
        o.rotationBlockLog2 = std::string(dep) == "ps" ? 0 : 9;
        Thc thc(o);
        auto x = at::randn({d});
        auto p = thc.encode(x, ctx);
        EXPECT_DOUBLE_EQ(p.bytes() * 8.0 / d, thc.bitsPerCoordinate(d, 1)) << dep << " b=" << bits << " d=" << d;
      }
  // Headers stated: d = 2^16, b = 4 (ps): 4 bits per coordinate + one float32 norm.
  Thc thc(psOptions());
  EXPECT_DOUBLE_EQ(thc.bitsPerCoordinate(1 << 16, 4), 4.0 + 32.0 / (1 << 16));
  // Its owners return sums of n table values in ⟨n·g + 1⟩ (Alg. 2 line 13),
  // no norms; g = 30: 7 bits at n = 4 (120 < 128), 10 at n = 30 (900 < 1024).
  EXPECT_DOUBLE_EQ(thc.downlinkBitsPerCoordinate(1 << 16, 4), 7.0);
  EXPECT_DOUBLE_EQ(thc.downlinkBitsPerCoordinate(1 << 16, 30), 10.0);
  // allreduce, q = 4, b = 8, blocks of 1024: 8 bits + 32/1024 for the block norms.
  ThcOptions o;
  o.deployment = "allreduce";
  o.aggregationBits = 8;
  o.rotationBlockLog2 = 10;
  EXPECT_DOUBLE_EQ(Thc(o).bitsPerCoordinate(1 << 16, 4), 8.0 + 32.0 / 1024);
  // An all-reduce's sums travel at the uplink's width.
  EXPECT_DOUBLE_EQ(Thc(o).downlinkBitsPerCoordinate(1 << 16, 4), Thc(o).bitsPerCoordinate(1 << 16, 4));
  // q = 3 does not divide a byte: 10 codes per int32 word, ceil(2^16/10) words.
  o.bits = 3;
  o.aggregationBits = 0;
  EXPECT_DOUBLE_EQ(Thc(o).bitsPerCoordinate(1 << 16, 4), 32.0 * 6554 / (1 << 16) + 32.0 / 1024);
}

TEST(Thc, NmseOnLogNormalMatchesTheory) {
  // Rotated coordinates are ~N(0, ||x||²/d); with M = t_p·||x||/sqrt(d) the
  // expected NMSE is (1 − p)·0.013496 (SQ on the optimal table, App. B) plus
  // the clamping loss E[(|A| − t_p)²; |A| > t_p] = (1 + t²)·p − 2tφ(t) = 0.00714
  // for t = 2.1539: 0.02021 in all. Finite-d fluctuation of the estimate is
  // ~1e-4 (d = 2^16 independent terms), so ±0.0015 is > 10 sigma and still
  // rejects a wrong table (uniform SQ at 4 bits gives ~0.032) or a wrong scale.
  at::manual_seed(5);
  comm::LocalCommunicator local;
  Context ctx{local};
  Thc thc(psOptions());
  double total = 0;
  const int reps = 4;
  for (int r = 0; r < reps; ++r) {
    ctx.step = r;
    auto x = at::randn({1 << 16}).exp();
    auto y = thc.decode(thc.encode(x, ctx), x.numel(), ctx);
    total += ((y - x).pow(2).sum() / x.pow(2).sum()).item<double>();
  }
  const double tp = thcTruncation(1.0 / 32);
  const double phi = std::exp(-tp * tp / 2) / std::sqrt(2 * M_PI);
  const double expected = (1 - 1.0 / 32) * 0.013496 + (1 + tp * tp) / 32 - 2 * tp * phi;
  EXPECT_NEAR(expected, 0.0202, 2e-4);
  EXPECT_NEAR(total / reps, expected, 1.5e-3);
}

// Unbiasedness of THC's quantisation where nothing is clamped (THC §5.2: SQ
// is unbiased; the clamp to [−M, M] is what biases it): E[decode(encode(x))] = x
// over the SQ noise and the rotation (RHT⁻¹ is linear). Each trial t takes a
// fresh step, so a fresh rotation and fresh private noise. With e_t the trial's
// error, ē their mean and V = mean_t ||e_t||², independence gives
// E||ē||² = E||e||²/T, and ||ē||²·T/V concentrates at 1 with relative spread
// ~sqrt(2/d') (d' = 1024 independent rotated coordinates: ±0.044), so the bound
// 2·V/T is > 20 sigma. The check can fail: with THC's default p = 1/32 a
// fraction p of the rotated (≈ Gaussian) coordinates clamp, which shrinks the
// estimate along x by κ = E[A² − A·clamp(A)] = E[A²; |A| > t] − t·E[|A|; |A| > t]
// = 2(tφ(t) + p/2) − 2tφ(t) = p (A ~ N(0, 1), t = t_p): a bias of
// p²·||x||² ≈ 9.8e-4·||x||² against V/T ≈ 0.02·||x||²/400 = 5e-5·||x||², ~20x,
// so the clamped case must exceed 5·V/T.
TEST(Thc, QuantisationWithoutClampingIsUnbiased) {
  comm::LocalCommunicator local;
  const int64_t d = 1000;  // padded to 1024 (full rotation) or 4 blocks of 256
  const int trials = 400;
  const at::Tensor x = at::randn({d}, at::make_generator<at::CPUGeneratorImpl>(31));
  struct Case {
    const char* name;
    ThcOptions o;
    bool clamps;
  };
  std::vector<Case> cases;
  auto add = [&](const char* name, const char* deployment, const char* variant, double p, int blockLog2,
                 const char* range, bool clamps) {
    ThcOptions o;
    o.deployment = deployment;
    o.variant = variant;
    o.p = p;
    o.rotationBlockLog2 = blockLog2;
    o.range = range;
    cases.push_back({name, o, clamps});
  };
  // p = 1e-12: t_p = 7.1, and a Gaussian coordinate beyond 7.1σ has probability
  // 1.2e-12 (the test checks every trial's rotated vector stays inside M).
  add("ps table", "ps", "table", 1e-12, 0, "norm", false);
  add("ps uniform", "ps", "uniform", 1e-12, 0, "norm", false);
  add("allreduce norm", "allreduce", "", 1e-12, 8, "norm", false);
  add("allreduce max", "allreduce", "", 1.0 / 32, 8, "max", false);  // M = max |R|: never clamps
  add("ps table, p = 1/32", "ps", "table", 1.0 / 32, 0, "norm", true);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Thc thc(c.o);
    Context ctx{local};
    ctx.seed = 9;
    at::Tensor sum = at::zeros({d}, at::kDouble);
    double sumSq = 0;
    for (int t = 0; t < trials; ++t) {
      ctx.step = t;
      if (!c.clamps && c.o.range == "norm") {  // the precondition: |R| <= M in every block
        RandomizedHadamard rht(d, c.o.rotationBlockLog2);
        const at::Tensor R = rht.forward(x, ctx.sharedSeed()).view({rht.numBlocks(), rht.blockSize()});
        at::Tensor padded = at::zeros({rht.paddedDim()});
        padded.narrow(0, 0, d).copy_(x);
        const at::Tensor M = padded.view({rht.numBlocks(), rht.blockSize()}).norm(2, {1}) *
                             (thcTruncation(c.o.p) / std::sqrt(static_cast<double>(rht.blockSize())));
        ASSERT_TRUE((R.abs().amax(1) < M).all().item<bool>()) << "trial " << t << " clamps";
      }
      const at::Tensor e = (thc.decode(thc.encode(x, ctx), d, ctx) - x).to(at::kDouble);
      sum += e;
      sumSq += e.square().sum().item<double>();
    }
    const double biasSq = (sum / trials).square().sum().item<double>(), V = sumSq / trials;
    if (c.clamps)
      EXPECT_GT(biasSq, 5 * V / trials) << "V/T " << V / trials;
    else
      EXPECT_LT(biasSq, 2 * V / trials) << "V/T " << V / trials;
  }
}

TEST(Thc, EncodeDecodeEqualsSingleRankAggregate) {
  comm::LocalCommunicator local;
  for (const char* dep : {"ps", "allreduce", "allreduce-max"}) {
    ThcOptions o;
    o.deployment = std::string(dep) == "ps" ? "ps" : "allreduce";
    if (std::string(dep) == "allreduce-max") {
      o.range = "max";
      o.rotationBlockLog2 = 9;
    }
    Thc thc(o);
    Context ctx{local};
    ctx.step = 3;
    auto x = at::randn({3000});
    auto viaCodec = thc.decode(thc.encode(x, ctx), x.numel(), ctx);
    auto agg = thc.aggregate(x, ctx);
    EXPECT_TRUE(at::equal(agg.mean, viaCodec)) << dep;
    // n = 1: the aggregate is this worker's own quantised vector.
    EXPECT_TRUE(at::allclose(agg.localApplied, agg.mean, 1e-6, 1e-6)) << dep;
  }
}

TEST(Thc, UniformVariantAndGranularityRule) {
  ThcOptions o;
  o.variant = "uniform";
  Thc uni(o);
  EXPECT_EQ(uni.granularityFor(4), 15);
  ThcOptions a;
  a.granularity = 0;  // automatic: 8-bit downlink while n·g <= 255
  Thc autoG(a);
  EXPECT_EQ(autoG.granularityFor(4), 30);
  EXPECT_EQ(autoG.downlinkBits(4), 7);    // 4·30 = 120 < 128
  EXPECT_EQ(autoG.granularityFor(10), 25);
  EXPECT_EQ(autoG.downlinkBits(10), 8);   // 250 < 256
  EXPECT_EQ(autoG.granularityFor(30), 15); // floor(255/30) = 8 < 2^4 − 1: g = 15, w widens
  EXPECT_EQ(autoG.downlinkBits(30), 9);   // 450 < 512
  Thc fixed(psOptions());
  EXPECT_EQ(fixed.downlinkBits(30), 10);  // ceil(log2(901))
  // The optimal table beats the uniform grid only slightly at (4, 30): the
  // normalised SQ variances are 0.013496 vs 0.013749 (closed form), so the
  // uniform NMSE should be (1 − p)·0.013749 + 0.00714 = 0.02046; same
  // tolerance argument as NmseOnLogNormalMatchesTheory.
  EXPECT_LT(solveThcTable(4, 30, 1.0 / 32).normalizedVariance, uniformThcTable(4, 1.0 / 32).normalizedVariance);
  EXPECT_NEAR(uniformThcTable(4, 1.0 / 32).normalizedVariance, 0.013749, 1e-6);
  comm::LocalCommunicator local;
  Context ctx{local};
  at::manual_seed(8);
  auto x = at::randn({1 << 16});
  const double nmse = ((uni.decode(uni.encode(x, ctx), x.numel(), ctx) - x).pow(2).sum() / x.pow(2).sum()).item<double>();
  EXPECT_NEAR(nmse, (1 - 1.0 / 32) * 0.013749 + 0.00714, 1.5e-3);
}

TEST(Thc, RejectsBadInput) {
  comm::LocalCommunicator local;
  Context ctx{local};
  Thc thc(psOptions());
  EXPECT_THROW(thc.aggregate(at::tensor({1.0f, NAN}), ctx), UserError);
  EXPECT_THROW(thc.aggregate(at::tensor({1.0f, INFINITY}), ctx), UserError);
  EXPECT_THROW(thc.aggregate(at::ones({4}, at::kDouble), ctx), UserError);
  EXPECT_THROW(thc.aggregate(at::ones({2, 2}), ctx), UserError);
  EXPECT_THROW(thc.aggregate(at::empty({0}), ctx), UserError);
  ThcOptions o;
  o.granularity = 10;  // < 2^4 − 1
  EXPECT_THROW(Thc{o}, UserError);
  o = ThcOptions{};
  o.deployment = "allreduce";
  o.bits = 1;
  EXPECT_THROW(Thc{o}, UserError);
  EXPECT_THROW(makeCompressor("thc", "{bits: 4, granularty: 3}"), ConfigError);
  // range: max is the all-reduce form's (§3.2.2); the ps deployment names why not.
  try {
    makeCompressor("thc", "{range: max}");
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("range: max"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("deployment: allreduce"));
  }
  EXPECT_THROW(makeCompressor("thc", "{deployment: allreduce, range: minmax}"), ConfigError);
  o = ThcOptions{};
  o.range = "max";  // deployment ps
  EXPECT_THROW(Thc{o}, UserError);
  EXPECT_NO_THROW(makeCompressor("thc", "{deployment: allreduce, range: max}"));
}

// The allreduce form quantises uniformly (end-to-end utility §3.2.2): asking
// for the table there is a ConfigError that says why, from YAML (naming the
// key) and from code; leaving the variant out picks each deployment's own.
TEST(Thc, AllReduceRefusesTheTableVariantWithAReason) {
  try {
    makeCompressor("thc", "{deployment: allreduce, variant: table}");
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("variant"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("partial sums"));
  }
  ThcOptions o;
  o.deployment = "allreduce";
  o.variant = "table";
  EXPECT_THROW(Thc{o}, ConfigError);
  o.variant = "";
  EXPECT_EQ(Thc{o}.options().variant, "uniform");
  EXPECT_EQ(Thc{ThcOptions{}}.options().variant, "table");
  EXPECT_NO_THROW(makeCompressor("thc", "{deployment: allreduce, variant: uniform}"));
}

// THC's checkpoint state (with the ErrorFeedback decorator around it, as the
// factory builds it): the residual, the quantiser and the table round-trip, and
// the restored compressor continues bit for bit; a checkpoint made with another
// quantiser or table is refused with a message naming it.
TEST(Thc, CheckpointCarriesTheQuantiserAndRefusesAnotherOne) {
  comm::LocalCommunicator local;
  Context ctx{local};
  for (const char* opts : {"{}", "{deployment: allreduce, rotation_block_log2: 8}", "{granularity: 0}"}) {
    SCOPED_TRACE(opts);
    auto a = makeCompressor("thc", opts);
    for (int64_t t = 0; t < 3; ++t) {
      ctx.step = t;
      a->aggregate(at::randn({3000}, at::make_generator<at::CPUGeneratorImpl>(40 + t)), ctx);
    }
    auto b = makeCompressor("thc", opts);
    testing::checkpointRoundTrip(*a, *b);
    ctx.step = 3;
    const at::Tensor g = at::randn({3000}, at::make_generator<at::CPUGeneratorImpl>(43));
    EXPECT_TRUE(at::equal(a->aggregate(g, ctx).mean, b->aggregate(g, ctx).mean));
  }
  // Another p (a different t_p and table) or bits: refused, naming both.
  auto a = makeCompressor("thc", "{}");
  a->aggregate(at::randn({3000}), ctx);
  auto otherP = makeCompressor("thc", "{p: 0.0625}");
  try {
    testing::checkpointRoundTrip(*a, *otherP);
    ADD_FAILURE() << "no UserError";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("checkpoint: THC was saved with bits 4, p 0.03125"));
  }
  // A table that is not the one this config solves for (a checkpoint from a
  // build whose solver differed): refused, naming the tables.
  torch::serialize::OutputArchive out;
  Thc plain(psOptions());
  plain.aggregate(at::randn({3000}), ctx);
  plain.save(out);
  std::stringstream buf;
  out.save_to(buf);
  torch::serialize::InputArchive in;
  in.load_from(buf);
  at::Tensor table;
  in.read("thc/table", table);
  table[1] = table[1].item<int64_t>() + 1;
  torch::serialize::OutputArchive tampered;
  for (const char* key : {"thc/quantiser", "thc/table_g"}) {
    at::Tensor t;
    in.read(key, t);
    tampered.write(key, t);
  }
  tampered.write("thc/table", table);
  std::stringstream buf2;
  tampered.save_to(buf2);
  torch::serialize::InputArchive in2;
  in2.load_from(buf2);
  Thc fresh(psOptions());
  try {
    fresh.load(in2);
    ADD_FAILURE() << "no UserError";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("checkpoint: THC table for g = 30 is [0, 4, 5,"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("this config's is [0, 3, 5, 7, 9, 11, 13, 14, 16"));
  }
}

// The generic path (compress/CodecPath.h) draws the kernels' rotation and
// noise and writes their wire format, so its payload equals the fast path's
// bit for bit wherever the block ranges agree: always with range: max (block
// maxima are exact), and with the norm range wherever the two norm sums
// (double, in different orders) round to the same float, which they nearly
// always do; the norms themselves agree to float rounding. Each path decodes
// the other's payload to the same vector up to the last bits of the ps
// decoder's fma. The fast path runs at every SIMD tier the CPU has.
TEST(Thc, GenericPathMatchesTheKernels) {
  comm::LocalCommunicator local;
  const std::vector<std::string> configs = {
      "variant: table",
      "variant: uniform\nbits: 2",
      "bits: 8\ngranularity: 0",
      "deployment: allreduce",
      "deployment: allreduce\nrotation_block_log2: 8",
      "deployment: allreduce\nrotation_block_log2: 9\nbits: 3",
      "deployment: allreduce\nrotation_block_log2: 10\naggregation_bits: 8",
      "deployment: allreduce\nrotation_block_log2: 8\nbits: 8\naggregation_bits: 16",
      "deployment: allreduce\nrange: max\nrotation_block_log2: 9",
      "deployment: allreduce\nrange: max\nbits: 3",
  };
  int64_t sameHeaders = 0, cases = 0;
  testing::forEachSimdLevel([&] {  // the fast path at every SIMD tier the CPU has
    for (const auto& yaml : configs)
      for (int64_t d : {1, 10, 1000, 3000, 4096}) {
        SCOPED_TRACE(yaml + " d " + std::to_string(d));
        auto fast = makeCompressor("thc", yaml + "\ncodec: auto");
        auto gen = makeCompressor("thc", yaml + "\ncodec: generic");
        Context ctx = testing::contextFor(local);
        ctx.seed = 17;
        ctx.step = d;
        const at::Tensor x = at::randn({d}, at::make_generator<at::CPUGeneratorImpl>(d));
        const Payload pf = fast->encode(x, ctx), pg = gen->encode(x, ctx);
        ASSERT_EQ(pf.tensors.size(), 2u);
        ASSERT_EQ(pg.tensors.size(), 2u);
        EXPECT_EQ(pf.bytes(), pg.bytes());
        EXPECT_TRUE(at::allclose(pf.tensors[0], pg.tensors[0], 1e-6, 0));
        ++cases;
        if (testing::bitEqual(pf.tensors[0], pg.tensors[0])) {
          ++sameHeaders;
          EXPECT_TRUE(testing::bitEqual(pf.tensors[1], pg.tensors[1]));
        }
        if (yaml.find("max") != std::string::npos) EXPECT_TRUE(testing::bitEqual(pf.tensors[0], pg.tensors[0]));
        const at::Tensor yf = fast->decode(pg, d, ctx), yg = gen->decode(pg, d, ctx);
        EXPECT_TRUE(at::allclose(yf, yg, 1e-5, 1e-6 * x.abs().max().item<double>()));
      }
  });
  EXPECT_GE(sameHeaders, cases * 9 / 10) << sameHeaders << " of " << cases;
}

TEST(Thc, FactoryBuildsBothDeployments) {
  auto ps = makeCompressor("thc", "{bits: 4, granularity: 30, p: 0.03125}");
  EXPECT_TRUE(ps->capabilities().summable);
  EXPECT_EQ(ps->capabilities().collectives, std::vector<std::string>{"ps"});
  auto ar = makeCompressor("thc", "{deployment: allreduce, bits: 4, rotation_block_log2: 12}");
  EXPECT_EQ(ar->capabilities().collectives, (std::vector<std::string>{"ring", "tree", "ps"}));
}

}  // namespace
}  // namespace gradzip::compress
