// Tests latency emulation (Communicator::setSendDelay, comm/DelayLine.h) on
// real Gloo groups: every plan pays the emulated delay once per message round
// as comm/CostModel.h counts rounds, the engine's collectives as much as
// gradzip's point-to-point ones. What is compared is the time the delay adds
// to an operation's critical path (the slowest rank): its time under a 30 ms
// delay less its time without one, each the fastest of kTrials that an
// undelayed barrier starts together (noise only adds time, and Gloo's own
// reduce-scatter varies by several ms between calls). The engine's own time
// is therefore left out (that reduce-scatter alone takes ~10 ms over four
// ranks on a loaded 2-core host), and tensors are a few bytes, so what the
// delay adds is its rounds × 30 ms, within 40% of one round: 12 ms of
// scheduling noise beside other tests on 2 cores, which a 20 ms delay's 8 ms
// did not always absorb.
#include "comm/Collective.h"
#include "comm/CostModel.h"
#include "comm/Reduction.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Median.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>

namespace gradzip::comm {
namespace {

using gradzip::testing::runRanks;
using Clock = std::chrono::steady_clock;

constexpr auto kDelay = std::chrono::milliseconds(30);
constexpr double kDelaySeconds = 0.030;
constexpr double kTolerance = 0.4 * kDelaySeconds;
constexpr int kTrials = 5;
// α = the delay, β = 0: a Table I cost is then the emulated time of its rounds.
constexpr NetworkParams kDelayOnly{kDelaySeconds, 0.0};

// The fastest over kTrials of the slowest rank's seconds for `op` under `delay`.
// Collective: every rank calls it with the same arguments.
double criticalPathSeconds(Communicator& c, std::chrono::microseconds delay, const std::function<void()>& op) {
  std::vector<double> s;
  for (int i = 0; i < kTrials; ++i) {
    c.setSendDelay(std::chrono::microseconds(0));
    c.barrier().wait();
    c.setSendDelay(delay);
    const auto t0 = Clock::now();
    op();
    at::Tensor slowest = at::tensor({std::chrono::duration<double>(Clock::now() - t0).count()}, at::kDouble);
    c.setSendDelay(std::chrono::microseconds(0));
    c.allReduce(slowest, ReduceOp::Max).wait();
    s.push_back(slowest.item<double>());
  }
  return *std::min_element(s.begin(), s.end());
}

// The seconds the delay adds to `op`'s critical path.
double addedSeconds(Communicator& c, const std::function<void()>& op) {
  return criticalPathSeconds(c, kDelay, op) - criticalPathSeconds(c, std::chrono::microseconds(0), op);
}

// The issue's closed form: an engine all-reduce and gradzip's ring over
// send/recv both make 2(N−1) rounds, so with negligible bytes both take
// 2(N−1) delays, and so do the tree (2 log2 N) and the parameter server (2)
// where N is a power of two (a heap-shaped tree's depth is log2 N there).
TEST(LatencyEmulation, EveryAllReducePaysItsTableOneRounds) {
  for (int n : {2, 4}) {
    runRanks(n, [n](Communicator& c) {
      const at::Tensor x = at::full({8}, float(c.rank()));
      std::map<std::string, double> added;
      for (const auto& name : collectiveNames()) {
        auto coll = makeCollective(name, c);
        at::Tensor out;
        added[name] = addedSeconds(c, [&] { out = coll->allReduce(x, *floatSum()); });
        EXPECT_TRUE(at::equal(out, at::full({8}, float(n * (n - 1) / 2)))) << name;
        const double expected = allReduceCost(name, 8 * 4, n, kDelayOnly);
        if (c.rank() == 0) {
          EXPECT_NEAR(added[name], expected, kTolerance)
              << name << " n=" << n << ": " << expected / kDelaySeconds << " rounds";
        }
      }
      // Same rounds, same bytes: the same emulated time.
      if (c.rank() == 0) {
        EXPECT_NEAR(added["engine"], added["ring"], kTolerance) << "n=" << n;
      }
    });
  }
}

// Each engine operation is held back by engineRounds(op, N) delays, the α
// term of its Table I row; N = 3 gives the fractional log2 3 ≈ 1.58.
TEST(LatencyEmulation, EachEngineOperationWaitsItsRounds) {
  for (int n : {2, 3, 4}) {
    runRanks(n, [n](Communicator& c) {
      at::Tensor t = at::ones({4});
      std::vector<at::Tensor> rows;
      for (int r = 0; r < n; ++r) rows.push_back(at::zeros({4}));
      const std::vector<std::pair<EngineOp, std::function<void()>>> ops = {
          {EngineOp::AllReduce, [&] { c.allReduce(t).wait(); }},
          {EngineOp::AllGather, [&] { c.allGather(rows, t).wait(); }},
          {EngineOp::Broadcast, [&] { c.broadcast(t, 0).wait(); }},
          {EngineOp::ReduceScatter, [&] { c.reduceScatter(t, rows).wait(); }},
          {EngineOp::Barrier, [&] { c.barrier().wait(); }},
      };
      for (const auto& [op, run] : ops) {
        const double added = addedSeconds(c, run);
        if (c.rank() == 0) {
          EXPECT_NEAR(added, engineRounds(op, n) * kDelaySeconds, kTolerance) << toString(op) << " n=" << n;
        }
      }
      // The delay counts in CommStats as the operation's time.
      EXPECT_GE(c.stats().get("allreduce").seconds, kTrials * engineRounds(EngineOp::AllReduce, n) * kDelaySeconds);
    });
  }
}

// The delay holds back the message, not the caller: four sends issued
// together return at once (the median delayed trial's four calls take a
// fraction of the delay) and arrive together, after one delay, not four.
TEST(LatencyEmulation, SendsIssuedTogetherShareOneRound) {
  runRanks(2, [](Communicator& c) {
    constexpr int kMessages = 4;
    std::vector<at::Tensor> bufs;
    for (int i = 0; i < kMessages; ++i) bufs.push_back(at::full({2}, float(i)));
    std::vector<double> issueSeconds;
    const double added = addedSeconds(c, [&] {
      std::vector<Work> works;
      const auto t0 = Clock::now();
      for (int i = 0; i < kMessages; ++i)
        works.push_back(c.rank() == 0 ? c.send(bufs[i], 1, i) : c.recv(bufs[i], 0, i));
      if (c.sendDelay().count() > 0) issueSeconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      waitAll(works);
    });
    if (c.rank() == 0) {
      EXPECT_NEAR(added, kDelaySeconds, kTolerance);
    }
    EXPECT_LT(median(issueSeconds), kTolerance) << "rank " << c.rank();
    for (int i = 0; i < kMessages; ++i) EXPECT_TRUE(at::equal(bufs[i], at::full({2}, float(i))));
  });
}

// Turning the delay off while sends are still held back keeps their order: a
// later undelayed send on the same tag must not overtake them.
TEST(LatencyEmulation, UndelayedSendsDoNotOvertakeHeldBackOnes) {
  runRanks(2, [](Communicator& c) {
    constexpr int kTag = 7;
    if (c.rank() == 0) {
      c.setSendDelay(kDelay);
      Work first = c.send(at::full({3}, 1.0f), 1, kTag);
      c.setSendDelay(std::chrono::microseconds(0));
      Work second = c.send(at::full({3}, 2.0f), 1, kTag);
      first.wait();
      second.wait();
    } else {
      at::Tensor a = at::zeros({3}), b = at::zeros({3});
      c.recv(a, 0, kTag).wait();
      c.recv(b, 0, kTag).wait();
      EXPECT_TRUE(at::equal(a, at::full({3}, 1.0f)));
      EXPECT_TRUE(at::equal(b, at::full({3}, 2.0f)));
    }
  });
}

}  // namespace
}  // namespace gradzip::comm
