// Tests comm/Collective.h and its algorithms (ring, tree, parameter server,
// engine) on real Gloo groups of 2, 3 and 4 ranks: closed-form sums for every
// reduction and dtype, lengths not divisible by the world size and of 0 and 1
// elements, bit-identical results on every rank (compared through the engine's
// all-gather of the result bytes), agreement with c10d's own all-reduce within
// float rounding, the bytes each algorithm puts on the wire, and the ring
// all-gather.
#include "comm/Collective.h"
#include "comm/EngineAllReduce.h"
#include "comm/ParameterServer.h"
#include "comm/RingAllReduce.h"
#include "comm/TreeAllReduce.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gradzip::comm {
namespace {

using gradzip::testing::runRanks;

// "-seg" variants cut messages into 64-byte segments, so small tensors also run
// through the segment pipeline (many segments per chunk, uneven last segments).
std::unique_ptr<Collective> makeAlgo(const std::string& name, Communicator& c) {
  if (name == "ring-seg") return std::make_unique<RingAllReduce>(c, 64);
  if (name == "tree-seg") return std::make_unique<TreeAllReduce>(c, 64);
  return makeCollective(name, c);
}
const std::vector<std::string> kPointToPoint = {"ring", "ring-seg", "tree", "tree-seg", "ps"};
std::vector<std::string> withEngine() {
  auto v = kPointToPoint;
  v.push_back("engine");
  return v;
}
const std::vector<int> kWorldSizes = {2, 3, 4};
std::vector<int64_t> lengthsFor(int n) { return {0, 1, n - 1, n + 1, 1003}; }

std::string where(const std::string& algo, at::ScalarType dt, int64_t len, int n) {
  return fmt::format("{} {} numel={} n={}", algo, c10::toString(dt), len, n);
}

// Every rank's `t` must have the same bytes: all-gather them with the engine
// (independent of the algorithms under test) and compare.
void expectSameOnAllRanks(Communicator& c, const at::Tensor& t, const std::string& what) {
  if (t.numel() == 0) return;
  at::Tensor bytes = t.contiguous().view(at::kByte);
  std::vector<at::Tensor> rows;
  for (int r = 0; r < c.size(); ++r) rows.push_back(at::empty_like(bytes));
  c.allGather(rows, bytes).wait();
  for (int r = 0; r < c.size(); ++r)
    EXPECT_TRUE(at::equal(rows[static_cast<size_t>(r)], bytes)) << what << ": rank " << r << " differs from rank "
                                                                << c.rank();
}

// Rank r contributes (r+1)·(i mod 5 - 2); the sum is n(n+1)/2·(i mod 5 - 2),
// small integers that every float dtype holds exactly, so any order is exact.
TEST(CollectiveTest, FloatSumClosedForm) {
  for (int n : kWorldSizes) {
    runRanks(n, [n](Communicator& c) {
      const int r = c.rank();
      for (const auto& algo : withEngine()) {
        auto coll = makeAlgo(algo, c);
        for (auto dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
          for (int64_t len : lengthsFor(n)) {
            at::Tensor pattern = at::arange(len, at::kLong).remainder(5) - 2;
            at::Tensor out = coll->allReduce(((r + 1) * pattern).to(dt), *floatSum());
            const auto what = where(algo, dt, len, n);
            EXPECT_EQ(out.scalar_type(), dt) << what;
            EXPECT_TRUE(at::equal(out, (n * (n + 1) / 2 * pattern).to(dt))) << what;
            expectSameOnAllRanks(c, out, what);
          }
        }
      }
    });
  }
}

// Random normal data: each algorithm against c10d's all-reduce. Summing n
// values in any order with rounding after each addition errs by at most
// γ_{n-1}·Σ|x| with γ_k = ku/(1-ku) (Higham, Accuracy and Stability, §4.2), u
// the unit roundoff; two such sums differ by at most 2γ_{n-1}·Σ|x|. Half adds an
// absolute error of half its smallest subnormal (2^-25) per addition.
TEST(CollectiveTest, FloatSumMatchesEngineWithinRounding) {
  struct Case {
    at::ScalarType dt;
    int64_t len;
    double u, tiny;
  };
  const std::vector<Case> cases = {{at::kFloat, 100003, std::ldexp(1.0, -24), 0},
                                   {at::kDouble, 1003, std::ldexp(1.0, -53), 0},
                                   {at::kHalf, 1003, std::ldexp(1.0, -11), std::ldexp(1.0, -25)},
                                   {at::kBFloat16, 1003, std::ldexp(1.0, -8), 0}};
  for (int n : kWorldSizes) {
    runRanks(n, [n, &cases](Communicator& c) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + c.rank());
      EngineAllReduce engine(c);
      for (const auto& k : cases) {
        at::Tensor x = at::randn({k.len}, gen, at::kFloat).to(k.dt);
        at::Tensor reference = engine.allReduce(x, *floatSum());
        at::Tensor absSum = x.abs().to(at::kDouble);
        c.allReduce(absSum).wait();
        const double g = (n - 1) * k.u / (1 - (n - 1) * k.u);
        at::Tensor bound = 2 * g * absSum + 2 * (n - 1) * k.tiny;
        for (const auto& algo : kPointToPoint) {
          if (k.len > 10000 && algo.find("-seg") != std::string::npos) continue;  // 1000s of 64-byte messages
          at::Tensor out = makeAlgo(algo, c)->allReduce(x, *floatSum());
          at::Tensor err = (out.to(at::kDouble) - reference.to(at::kDouble)).abs();
          EXPECT_TRUE((err <= bound).all().item<bool>())
              << where(algo, k.dt, k.len, n) << ": max error " << err.max().item<double>();
          expectSameOnAllRanks(c, out, where(algo, k.dt, k.len, n));
        }
      }
    });
  }
}

// Integer extremes of each input dtype, summed in a wider accumulator: rank r
// contributes hi - r at even and lo + r at odd positions, so the sums
// n·hi - n(n-1)/2 and n·lo + n(n-1)/2 overflow the input dtype but not `wide`.
TEST(CollectiveTest, WideIntSumClosedForm) {
  struct Case {
    at::ScalarType in, wide;
    int64_t lo, hi;
  };
  const std::vector<Case> cases = {{at::kChar, at::kInt, -128, 127},
                                   {at::kByte, at::kInt, 0, 255},
                                   {at::kChar, at::kLong, -128, 127},
                                   {at::kByte, at::kLong, 0, 255},
                                   {at::kShort, at::kInt, -32768, 32767},
                                   {at::kInt, at::kLong, -2147483648LL, 2147483647LL},
                                   {at::kLong, at::kLong, -(int64_t{1} << 60), int64_t{1} << 60}};
  for (int n : kWorldSizes) {
    runRanks(n, [n, &cases](Communicator& c) {
      const int64_t r = c.rank(), tri = int64_t{n} * (n - 1) / 2;
      for (const auto& algo : withEngine()) {
        auto coll = makeAlgo(algo, c);
        for (const auto& k : cases) {
          auto red = wideIntSum(k.wide);
          for (int64_t len : lengthsFor(n)) {
            at::Tensor even = at::arange(len, at::kLong).remainder(2) == 0;
            // uint8 contributions count down from 255 at every position.
            const int64_t loR = k.in == at::kByte ? k.hi - r : k.lo + r;
            const int64_t loSum = k.in == at::kByte ? n * k.hi - tri : n * k.lo + tri;
            at::Tensor x = at::where(even, at::full({len}, k.hi - r, at::kLong), at::full({len}, loR, at::kLong));
            at::Tensor expected =
                at::where(even, at::full({len}, n * k.hi - tri, at::kLong), at::full({len}, loSum, at::kLong));
            at::Tensor out = coll->allReduce(x.to(k.in), *red);
            const auto what = where(algo, k.in, len, n) + " -> " + c10::toString(k.wide);
            EXPECT_EQ(out.scalar_type(), k.wide) << what;
            EXPECT_TRUE(at::equal(out, expected.to(k.wide))) << what;
            expectSameOnAllRanks(c, out, what);
          }
        }
      }
    });
  }
}

// Per position i every rank contributes the same sign s_i, magnitude
// m = (stride·(i/2) + 3r) mod (lim+1). A chain of same-sign saturating adds equals
// s_i·min(lim, Σ m) whatever the order, and the exact sums exceed lim at many
// positions: the result must clamp, and never wrap or flip sign.
TEST(CollectiveTest, SaturatingAddClampsNeverWraps) {
  struct Case {
    int bits;
    at::ScalarType dt;
  };
  for (int n : kWorldSizes) {
    runRanks(n, [n](Communicator& c) {
      for (const auto& algo : kPointToPoint) {
        auto coll = makeAlgo(algo, c);
        for (const Case& k : {Case{4, at::kChar}, Case{8, at::kChar}, Case{12, at::kShort}}) {
          const int64_t lim = (int64_t{1} << (k.bits - 1)) - 1;
          auto red = saturatingAdd(k.bits);
          for (int64_t len : lengthsFor(n)) {
            at::Tensor i = at::arange(len, at::kLong);
            at::Tensor sign = 2 * i.remainder(2) - 1;
            const int64_t stride = std::max<int64_t>(1, (lim + 1) / 128);  // reach lim within 1003 elements
            auto magnitude = [&](int64_t rank) {
              return (stride * i.div(2, "floor") + 3 * rank).remainder(lim + 1);
            };
            at::Tensor total = at::zeros({len}, at::kLong);
            for (int q = 0; q < n; ++q) total += magnitude(q);
            at::Tensor expected = sign * total.clamp_max(lim);
            at::Tensor out = coll->allReduce((sign * magnitude(c.rank())).to(k.dt), *red);
            const auto what = where(algo, k.dt, len, n) + fmt::format(" bits={}", k.bits);
            EXPECT_EQ(out.scalar_type(), k.dt) << what;
            EXPECT_TRUE(at::equal(out, expected.to(k.dt))) << what;
            if (len > 0) {
              EXPECT_LE(out.to(at::kLong).abs().max().item<int64_t>(), lim) << what;
              EXPECT_TRUE((out.to(at::kLong) * sign >= 0).all().item<bool>()) << what << ": a sign flipped";
            }
            if (len == 1003) {
              EXPECT_TRUE((total > lim).any().item<bool>()) << "the test must saturate";
            }
            expectSameOnAllRanks(c, out, what);
          }
        }
      }
    });
  }
}

// THC Alg. 2: the result is Σ_r table[codes_r], codes_r = (7i + 3r) mod 16.
TEST(CollectiveTest, TableLookupSumClosedForm) {
  at::Tensor table = at::tensor(std::vector<int64_t>{0, 3, 5, 7, 9, 11, 13, 14, 16, 17, 19, 21, 23, 25, 27, 30});
  for (int n : kWorldSizes) {
    runRanks(n, [n, &table](Communicator& c) {
      for (const auto& algo : kPointToPoint) {
        auto coll = makeAlgo(algo, c);
        for (auto wide : {at::kInt, at::kLong}) {
          auto red = tableLookupSum(table, wide);
          for (int64_t len : lengthsFor(n)) {
            auto codes = [&](int64_t rank) { return (7 * at::arange(len, at::kLong) + 3 * rank).remainder(16); };
            at::Tensor expected = at::zeros({len}, at::kLong);
            for (int q = 0; q < n; ++q) expected += table.index({codes(q)});
            at::Tensor out = coll->allReduce(codes(c.rank()).to(at::kByte), *red);
            const auto what = where(algo, wide, len, n);
            EXPECT_EQ(out.scalar_type(), wide) << what;
            EXPECT_TRUE(at::equal(out, expected.to(wide))) << what;
            expectSameOnAllRanks(c, out, what);
          }
        }
      }
    });
  }
}

// Bytes on the wire per rank, M = numel·4 with n | numel: the ring sends
// 2(N-1)/N·M; the tree sends M to its parent and M to each child; the PS sends
// (N-1)/N of the tensor up in the raw dtype and (N-1)/N down widened.
TEST(CollectiveTest, BytesOnTheWire) {
  for (int n : kWorldSizes) {
    runRanks(n, [n](Communicator& c) {
      const int r = c.rank();
      const int64_t numel = 1200, shard = numel / n;
      at::Tensor x = at::ones({numel});
      c.stats().reset();
      RingAllReduce(c, 256).allReduce(x, *floatSum());
      EXPECT_EQ(c.stats().get("send").bytesSent, 2 * (n - 1) * shard * 4) << "ring n=" << n;
      EXPECT_EQ(c.stats().get("recv").bytesReceived, 2 * (n - 1) * shard * 4) << "ring n=" << n;

      c.stats().reset();
      TreeAllReduce(c, 256).allReduce(x, *floatSum());
      const int64_t children = (2 * r + 1 < n) + (2 * r + 2 < n);
      EXPECT_EQ(c.stats().get("send").bytesSent, ((r > 0) + children) * numel * 4) << "tree rank " << r;

      c.stats().reset();
      ParameterServer(c).allReduce(at::zeros({numel}, at::kByte), *tableLookupSum(at::arange(4, at::kLong)));
      EXPECT_EQ(c.stats().get("send").bytesSent, (n - 1) * shard * (1 + 4)) << "ps n=" << n;
      EXPECT_EQ(c.stats().get("recv").bytesReceived, (n - 1) * shard * (1 + 4)) << "ps n=" << n;
    });
  }
}

// The injected per-message delay (latency emulation) goes through send and
// changes nothing in the result.
TEST(CollectiveTest, SendDelayLeavesResultsUnchanged) {
  runRanks(3, [](Communicator& c) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(77 + c.rank());
    at::Tensor x = at::randn({1003}, gen);
    for (const auto& algo : kPointToPoint) {
      auto coll = makeAlgo(algo, c);
      at::Tensor plain = coll->allReduce(x, *floatSum());
      c.setSendDelay(std::chrono::microseconds(500));
      c.stats().reset();
      at::Tensor delayed = coll->allReduce(x, *floatSum());
      EXPECT_GT(c.stats().get("send").calls, 0) << algo << " must use send()";
      c.setSendDelay(std::chrono::microseconds(0));
      EXPECT_TRUE(at::equal(plain, delayed)) << algo;
    }
    c.setSendDelay(std::chrono::microseconds(500));
    at::Tensor rows = ringAllGather(c, x);
    c.setSendDelay(std::chrono::microseconds(0));
    EXPECT_TRUE(at::equal(rows[c.rank()], x));
  });
}

// Row r of the gathered tensor is rank r's input, for Gloo dtypes and for int16
// (which only travels as bytes); 300007 floats span two 1 MiB segments.
TEST(CollectiveTest, RingAllGatherStacksInRankOrder) {
  for (int n : kWorldSizes) {
    runRanks(n, [n](Communicator& c) {
      auto input = [](int64_t len, int64_t rank, at::ScalarType dt) {
        return (at::arange(len, at::kLong).remainder(97) + 100 * rank).to(dt);
      };
      for (auto dt : {at::kFloat, at::kShort, at::kByte}) {
        for (int64_t len : {int64_t{0}, int64_t{1}, int64_t{1003}, int64_t{300007}}) {
          if (dt != at::kFloat && len > 1003) continue;
          at::Tensor out = ringAllGather(c, input(len, c.rank(), dt));
          ASSERT_EQ(out.sizes(), (at::IntArrayRef{n, len}));
          EXPECT_EQ(out.scalar_type(), dt);
          for (int q = 0; q < n; ++q)
            EXPECT_TRUE(at::equal(out[q], input(len, q, dt))) << where("allgather", dt, len, n) << " row " << q;
        }
      }
    });
  }
}

TEST(CollectiveTest, FactoryAndErrors) {
  EXPECT_EQ(collectiveNames(), (std::vector<std::string>{"ring", "tree", "ps", "engine"}));
  runRanks(2, [](Communicator& c) {
    for (const auto& name : collectiveNames()) EXPECT_EQ(makeCollective(name, c)->name(), name);
    try {
      makeCollective("rign", c);
      ADD_FAILURE() << "expected UserError";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("'rign'"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("ring, tree, ps, engine"), std::string::npos);
    }
    EngineAllReduce engine(c);
    for (auto red : {saturatingAdd(8), tableLookupSum(at::arange(4, at::kLong))}) {
      try {
        engine.allReduce(at::zeros({4}, red->name().rfind("sat", 0) == 0 ? at::kChar : at::kByte), *red);
        ADD_FAILURE() << "expected UserError";
      } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find(red->name()), std::string::npos) << e.what();
      }
    }
    for (const auto& algo : withEngine()) {
      EXPECT_THROW(makeAlgo(algo, c)->allReduce(at::zeros({2, 3}), *floatSum()), UserError) << algo;
      EXPECT_THROW(makeAlgo(algo, c)->allReduce(at::zeros({6}, at::kInt), *floatSum()), UserError) << algo;
    }
    EXPECT_THROW(RingAllReduce(c, 0), UserError);
  });
}

// One rank: every algorithm returns the lifted input.
TEST(CollectiveTest, WorldSizeOne) {
  runRanks(1, [](Communicator& c) {
    at::Tensor codes = at::tensor({1, 2, 3}, at::kByte);
    at::Tensor table = at::tensor(std::vector<int64_t>{0, 10, 20, 30});
    for (const auto& algo : kPointToPoint) {
      at::Tensor out = makeAlgo(algo, c)->allReduce(codes, *tableLookupSum(table));
      EXPECT_TRUE(at::equal(out, at::tensor({10, 20, 30}, at::kInt))) << algo;
    }
    at::Tensor x = at::tensor({1.5f, -2.0f});
    EXPECT_TRUE(at::equal(makeAlgo("engine", c)->allReduce(x, *floatSum()), x));
    EXPECT_TRUE(at::equal(ringAllGather(c, x), x.unsqueeze(0)));
  });
}

}  // namespace
}  // namespace gradzip::comm
