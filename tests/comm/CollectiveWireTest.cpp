// Tests the plumbing of comm/Collective.h on real Gloo groups: the bytes each
// algorithm puts on the wire, latency injection through send(), the ring
// all-gather, the factory and its errors, and world size 1.
#include "comm/Collective.h"
#include "comm/EngineAllReduce.h"
#include "comm/ParameterServer.h"
#include "comm/RingAllReduce.h"
#include "comm/TreeAllReduce.h"
#include "tests/comm/CollectiveTesting.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>

namespace gradzip::comm {
namespace {

using gradzip::testing::runRanks;
using namespace gradzip::comm::testutil;

// Bytes on the wire per rank, M = numel·4 with n | numel: the ring sends
// 2(N-1)/N·M; the tree sends M to its parent and M to each child; the PS sends
// (N-1)/N of the tensor up in the raw dtype and (N-1)/N down widened.
TEST(CollectiveWireTest, BytesOnTheWire) {
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
TEST(CollectiveWireTest, SendDelayLeavesResultsUnchanged) {
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
TEST(CollectiveWireTest, RingAllGatherStacksInRankOrder) {
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

TEST(CollectiveWireTest, FactoryAndErrors) {
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
TEST(CollectiveWireTest, WorldSizeOne) {
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
