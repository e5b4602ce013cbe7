// Tests comm/CostModel.h against the flexible-communication paper: the Table I
// formulas in closed form, and Eq. 4 reproducing Table VI's ResNet rows.
#include "comm/CostModel.h"

#include "util/Error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gradzip::comm {
namespace {

// 8 workers, α = 1 ms, 1 Gbit/s: β = 8 ns per byte.
const NetworkParams kOneMsOneGbps = NetworkParams::fromLatencyAndGbps(1e-3, 1.0);

TEST(CostModelTest, BandwidthConversion) {
  EXPECT_DOUBLE_EQ(kOneMsOneGbps.alpha, 1e-3);
  EXPECT_DOUBLE_EQ(kOneMsOneGbps.beta, 8e-9);
  EXPECT_DOUBLE_EQ(NetworkParams::fromLatencyAndGbps(0, 10).beta, 0.8e-9);
  EXPECT_THROW(NetworkParams::fromLatencyAndGbps(1e-3, 0), UserError);
  EXPECT_THROW(NetworkParams::fromLatencyAndGbps(-1, 1), UserError);
}

TEST(CostModelTest, TableOneClosedForms) {
  const NetworkParams p{2.0, 3.0};  // α = 2 s, β = 3 s/B: every term is visible
  const double m = 10;
  // N = 8, log2 N = 3
  EXPECT_DOUBLE_EQ(psCost(m, 8, p), 2 * 2 + 2 * 7 * m * 3);
  EXPECT_DOUBLE_EQ(ringAllReduceCost(m, 8, p), 2 * 7 * 2 + 2.0 * 7 / 8 * m * 3);
  EXPECT_DOUBLE_EQ(treeAllReduceCost(m, 8, p), 2 * 2 * 3 + 2 * 3 * m * 3);
  EXPECT_DOUBLE_EQ(broadcastCost(m, 8, p), 2 * 3 + 3 * m * 3);
  EXPECT_DOUBLE_EQ(allGatherCost(m, 8, p), 2 * 3 + 7 * m * 3);
  // N = 2: ring moves M once each way, the tree twice.
  EXPECT_DOUBLE_EQ(ringAllReduceCost(m, 2, p), 2 * 2 + m * 3);
  EXPECT_DOUBLE_EQ(treeAllReduceCost(m, 2, p), 2 * 2 + 2 * m * 3);
  // One worker communicates nothing.
  for (double c : {psCost(m, 1, p), ringAllReduceCost(m, 1, p), treeAllReduceCost(m, 1, p), broadcastCost(m, 1, p),
                   allGatherCost(m, 1, p)})
    EXPECT_DOUBLE_EQ(c, 0.0);
  EXPECT_DOUBLE_EQ(allReduceCost("ring", m, 8, p), ringAllReduceCost(m, 8, p));
  EXPECT_DOUBLE_EQ(allReduceCost("engine", m, 8, p), ringAllReduceCost(m, 8, p));
  EXPECT_DOUBLE_EQ(allReduceCost("tree", m, 8, p), treeAllReduceCost(m, 8, p));
  EXPECT_DOUBLE_EQ(allReduceCost("ps", m, 8, p), psCost(m, 8, p));
}

// The rounds latency emulation charges the engine: the α coefficients of the
// rows above (all-reduce and reduce-scatter as a ring), none for one worker.
TEST(CostModelTest, EngineRoundsAreTheRowsAlphaTerms) {
  EXPECT_DOUBLE_EQ(engineRounds(EngineOp::AllReduce, 8), 14);
  EXPECT_DOUBLE_EQ(engineRounds(EngineOp::ReduceScatter, 8), 14);
  EXPECT_DOUBLE_EQ(engineRounds(EngineOp::AllGather, 8), 3);
  EXPECT_DOUBLE_EQ(engineRounds(EngineOp::Broadcast, 8), 3);
  EXPECT_DOUBLE_EQ(engineRounds(EngineOp::Barrier, 8), 3);
  EXPECT_DOUBLE_EQ(engineRounds(EngineOp::Broadcast, 3), std::log2(3.0));
  EXPECT_DOUBLE_EQ(barrierCost(4, {2.0, 3.0}), 4.0);
  for (auto op : {EngineOp::AllReduce, EngineOp::AllGather, EngineOp::Broadcast, EngineOp::ReduceScatter,
                  EngineOp::Barrier})
    EXPECT_DOUBLE_EQ(engineRounds(op, 1), 0.0) << toString(op);
  EXPECT_DOUBLE_EQ(engineRounds(EngineOp::AllReduce, 5) * 1e-3,
                   allReduceCost("engine", 0, 5, NetworkParams{1e-3, 0.0}));
}

// Table VI, (α, 1/β) = (1 ms, 1 Gbps), N = 8, CR 0.1, fp32 gradients (M = 4
// bytes per parameter; AG carries 32-bit values and 32-bit indices, 2Mc bytes).
// The paper's formula values: ResNet18 (11.68M parameters) 526.3 / 194.5 /
// 345.4 ms (measured 526.3 / 194.7 / 345.6); ResNet50 (25.56M) 1148 / 405.5 /
// 745 ms as printed in the table.
TEST(CostModelTest, ReproducesTableSix) {
  struct Row {
    double params, ag, ring, tree;
  };
  for (const Row& row : {Row{11.68e6, 526.3, 194.5, 345.4}, Row{25.56e6, 1148.0, 405.5, 745.0}}) {
    const double m = 4 * row.params;
    EXPECT_NEAR(agTopKCost(m, 0.1, 8, kOneMsOneGbps) * 1e3, row.ag, 0.01 * row.ag);
    EXPECT_NEAR(artRingCost(m, 0.1, 8, kOneMsOneGbps) * 1e3, row.ring, 0.01 * row.ring);
    EXPECT_NEAR(artTreeCost(m, 0.1, 8, kOneMsOneGbps) * 1e3, row.tree, 0.01 * row.tree);
  }
  // Eq. 4b is 3α log N + 3Mcβ log N exactly.
  const double m = 4 * 11.68e6;
  EXPECT_DOUBLE_EQ(artTreeCost(m, 0.1, 8, kOneMsOneGbps), 3 * 1e-3 * 3 + 3 * m * 0.1 * 8e-9 * 3);
}

// Table VI's choices for ResNet18: at 1 Gbps and CR 0.1 ART-Ring wins; at
// 10 Gbps and CR 0.001 (or 0.01) the all-gather wins.
TEST(CostModelTest, CheapestTopKFollowsTableSix) {
  const double m = 4 * 11.68e6;
  const NetworkParams tenGbps = NetworkParams::fromLatencyAndGbps(1e-3, 10);
  EXPECT_EQ(cheapestTopK(m, 0.1, 8, kOneMsOneGbps), TopKCollective::ArtRing);
  EXPECT_EQ(cheapestTopK(m, 0.001, 8, tenGbps), TopKCollective::AllGather);
  EXPECT_EQ(cheapestTopK(m, 0.01, 8, tenGbps), TopKCollective::AllGather);
  // With no latency and N = 4 the byte terms decide: AG 2·3 = 6Mcβ, ART-Ring
  // (1.5 + 2) = 3.5Mcβ, ART-Tree 3·2 = 6Mcβ. With a huge α the fewest messages
  // win: AG log N = 3 against 17 and 9.
  EXPECT_EQ(cheapestTopK(m, 0.1, 4, NetworkParams{0, 1e-9}), TopKCollective::ArtRing);
  EXPECT_EQ(cheapestTopK(1e3, 0.1, 8, NetworkParams{1.0, 1e-9}), TopKCollective::AllGather);
  EXPECT_STREQ(toString(TopKCollective::ArtTree), "art-tree");
}

TEST(CostModelTest, RejectsBadArguments) {
  EXPECT_THROW(agTopKCost(1e6, 0.0, 8, kOneMsOneGbps), UserError);
  EXPECT_THROW(artRingCost(1e6, 1.5, 8, kOneMsOneGbps), UserError);
  EXPECT_THROW(ringAllReduceCost(1e6, 0, kOneMsOneGbps), UserError);
  EXPECT_THROW(psCost(-1, 4, kOneMsOneGbps), UserError);
  try {
    allReduceCost("rung", 1, 2, kOneMsOneGbps);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'rung'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("ring, tree, ps"), std::string::npos);
  }
}

}  // namespace
}  // namespace gradzip::comm
