// Tests data/DistributedSampler.h: equal step counts on every rank, disjoint
// shards covering the dataset (exactly, or up to the stated padding), epoch
// reshuffles shared by all ranks, and resume from a saved state. One test runs
// real ranks and all-gathers the shards over Gloo.
#include "data/DistributedSampler.h"

#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace gradzip::data {
namespace {

std::vector<std::vector<int64_t>> shards(SamplerOptions o, int64_t epoch) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < o.worldSize; ++r) {
    o.rank = r;
    DistributedSampler s(o);
    s.setEpoch(epoch);
    std::vector<int64_t> visited;
    while (s.hasNext())
      for (int64_t i : s.next()) visited.push_back(i);
    // The batches walk the shard in order; drop_last leaves out only a final partial batch.
    const auto& shard = s.shard();
    size_t expected = o.dropLast ? size_t(s.stepsPerEpoch() * o.batchSize) : shard.size();
    EXPECT_EQ(visited, std::vector<int64_t>(shard.begin(), shard.begin() + long(expected)));
    EXPECT_LT(shard.size() - visited.size(), size_t(o.batchSize));
    out.push_back(shard);
  }
  return out;
}

TEST(DistributedSampler, ShardsAreDisjointCoverAndHaveEqualSteps) {
  for (int64_t n : {10, 11, 97, 100}) {
    for (int w : {1, 2, 3, 4}) {
      for (bool dropLast : {false, true}) {
        SamplerOptions o{n, 0, w, 2, true, dropLast, 7};
        auto sh = shards(o, 3);
        const int64_t perRank = dropLast ? n / w : (n + w - 1) / w;
        std::map<int64_t, int> count;
        for (int r = 0; r < w; ++r) {
          ASSERT_EQ(int64_t(sh[size_t(r)].size()), perRank) << n << " " << w << " " << dropLast;
          for (int64_t i : sh[size_t(r)]) {
            ASSERT_TRUE(i >= 0 && i < n);
            ++count[i];
          }
        }
        // Every rank takes the same number of steps.
        std::set<int64_t> steps;
        for (int r = 0; r < w; ++r) {
          o.rank = r;
          steps.insert(DistributedSampler(o).stepsPerEpoch());
        }
        EXPECT_EQ(steps.size(), 1u);
        int64_t repeats = 0;
        for (auto [i, c] : count) repeats += c - 1;
        if (dropLast) {
          EXPECT_EQ(repeats, 0);  // disjoint
          EXPECT_EQ(int64_t(count.size()), perRank * w);  // all but n mod w examples
        } else {
          EXPECT_EQ(int64_t(count.size()), n);             // covers the dataset
          EXPECT_EQ(repeats, perRank * w - n);             // only the padding repeats
          EXPECT_LT(repeats, w);
        }
      }
    }
  }
}

TEST(DistributedSampler, ReshufflesPerEpochDeterministically) {
  SamplerOptions o{50, 0, 2, 5, true, false, 99};
  auto e0 = shards(o, 0), e1 = shards(o, 1), e0again = shards(o, 0);
  EXPECT_EQ(e0, e0again);
  EXPECT_NE(e0, e1);
  o.seed = 100;
  EXPECT_NE(shards(o, 0), e0);
  o.shuffle = false;  // strided in order
  auto plain = shards(o, 5);
  EXPECT_EQ(plain[1], (std::vector<int64_t>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 33, 35, 37,
                                            39, 41, 43, 45, 47, 49}));
}

TEST(DistributedSampler, PartialLastBatchOnlyWithoutDropLast) {
  SamplerOptions o{10, 0, 1, 4, false, false, 0};
  DistributedSampler keep(o);
  EXPECT_EQ(keep.stepsPerEpoch(), 3);
  EXPECT_EQ(keep.batch(2), (std::vector<int64_t>{8, 9}));
  o.dropLast = true;
  EXPECT_EQ(DistributedSampler(o).stepsPerEpoch(), 2);
}

TEST(DistributedSampler, RestoreContinuesWithTheSameBatches) {
  SamplerOptions o{40, 1, 3, 3, true, true, 5};
  DistributedSampler a(o);
  a.setEpoch(2);
  a.next();
  a.next();
  SamplerState saved = a.state();
  EXPECT_EQ(saved.epoch, 2);
  EXPECT_EQ(saved.position, 2);
  DistributedSampler b(o);
  b.restore(saved);
  while (a.hasNext()) EXPECT_EQ(a.next(), b.next());
  EXPECT_FALSE(b.hasNext());
  EXPECT_THROW(b.restore({0, 99}), UserError);
}

TEST(DistributedSampler, RejectsImpossibleSetups) {
  EXPECT_THROW(DistributedSampler(SamplerOptions{10, 2, 2, 1, true, true, 0}), UserError);   // rank >= world
  EXPECT_THROW(DistributedSampler(SamplerOptions{3, 0, 4, 1, true, true, 0}), UserError);    // 0 per rank
  EXPECT_THROW(DistributedSampler(SamplerOptions{10, 0, 1, 0, true, true, 0}), UserError);   // batch 0
}

TEST(DistributedSampler, RealRanksGetDisjointCoveringShards) {
  const int world = 3;
  const int64_t n = 60;
  gradzip::testing::runRanks(world, [&](comm::Communicator& c) {
    DistributedSampler s(SamplerOptions{n, c.rank(), c.size(), 4, true, true, 17});
    s.setEpoch(1);
    at::Tensor mine = at::tensor(s.shard(), at::kLong);
    std::vector<at::Tensor> all(size_t(c.size()));
    for (auto& t : all) t = at::empty_like(mine);
    c.allGather(all, mine).wait();
    at::Tensor sorted = std::get<0>(at::cat(all).sort());
    // n divisible by the world size: the shards partition [0, n).
    if (!at::equal(sorted, at::arange(n, at::kLong))) throw std::runtime_error("shards do not partition [0, n)");
  });
}

}  // namespace
}  // namespace gradzip::data
