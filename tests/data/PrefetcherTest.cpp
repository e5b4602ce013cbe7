// Tests data/Prefetcher.h and data/DataLoader.h: in-order delivery from several
// workers, the bounded look-ahead window, exceptions reaching the consumer, and
// loader batches that are identical whatever the threading and after a resume.
#include "data/DataLoader.h"
#include "data/ImageDataset.h"
#include "data/Prefetcher.h"

#include "util/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

namespace gradzip::data {
namespace {

Batch stepBatch(int64_t step) { return Batch{at::full({1}, step, at::kLong), at::Tensor()}; }

TEST(Prefetcher, DeliversEveryStepInOrderWithinTheWindow) {
  for (int depth : {0, 1, 3}) {
    for (int workers : {1, 3}) {
      std::atomic<int64_t> consumed{2};
      std::atomic<int64_t> maxAhead{0};
      Prefetcher p(2, 40, [&](int64_t step) {
        // A worker may only hold steps in [consumed, consumed + depth).
        int64_t ahead = step - consumed.load();
        int64_t prev = maxAhead.load();
        while (ahead > prev && !maxAhead.compare_exchange_weak(prev, ahead)) {}
        return stepBatch(step);
      }, depth, workers);
      for (int64_t s = 2; s < 40; ++s) {
        auto b = p.next();
        ASSERT_TRUE(b.has_value());
        EXPECT_EQ(b->input.item<int64_t>(), s);
        consumed = s + 1;
      }
      EXPECT_FALSE(p.next().has_value());
      // Our `consumed` is published just after next() returns, so it may lag the
      // prefetcher's own count by one step: the bound is depth, not depth - 1.
      EXPECT_LE(maxAhead.load(), depth) << depth << " " << workers;
    }
  }
}

TEST(Prefetcher, ProducerExceptionReachesTheConsumerAtItsStep) {
  Prefetcher p(0, 100, [](int64_t step) {
    if (step == 5) throw UserError("bad record in step 5");
    return stepBatch(step);
  }, 4, 2);
  for (int64_t s = 0; s < 5; ++s) EXPECT_EQ(p.next()->input.item<int64_t>(), s);
  EXPECT_THROW(
      try { p.next(); } catch (const UserError& e) {
        EXPECT_STREQ(e.what(), "bad record in step 5");
        throw;
      },
      UserError);
  EXPECT_THROW(p.next(), UserError);  // and again: production stopped, nothing hangs
}

TEST(Prefetcher, DestroyingMidEpochJoinsTheWorkers) {
  std::atomic<int> produced{0};
  {
    Prefetcher p(0, 1000, [&](int64_t step) {
      ++produced;
      return stepBatch(step);
    }, 2, 2);
    EXPECT_EQ(p.next()->input.item<int64_t>(), 0);
  }
  // After the join no worker is left running: at most the window was produced.
  EXPECT_LE(produced.load(), 3);
}

std::shared_ptr<const Dataset> smallImages() {
  ImageData d;
  d.images = at::randint(0, 256, {50, 6, 6, 3}, at::TensorOptions().dtype(at::kByte));
  d.labels = at::arange(50, at::kLong) % 5;
  d.classNames = {"a", "b", "c", "d", "e"};
  d.source = "generated";
  return std::make_shared<ImageDataset>("small", d, TransformOptions{2, true, {0.5}, {0.25}}, true);
}

std::vector<Batch> epoch(DataLoader& l) {
  std::vector<Batch> out;
  while (auto b = l.next()) out.push_back(*b);
  return out;
}

void expectSame(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i].input, b[i].input)) << i;
    EXPECT_TRUE(at::equal(a[i].target, b[i].target)) << i;
  }
}

TEST(DataLoader, BatchesDependOnlyOnSeedEpochRankStep) {
  auto data = smallImages();
  DataLoader sync(data, 1, 2, LoaderOptions{4, true, true, 0, 1, 9});
  DataLoader async(data, 1, 2, LoaderOptions{4, true, true, 3, 2, 9});
  sync.startEpoch(4);
  async.startEpoch(4);
  auto a = epoch(sync), b = epoch(async);
  EXPECT_EQ(int64_t(a.size()), sync.stepsPerEpoch());
  EXPECT_EQ(a.size(), 6u);  // floor(floor(50 / 2) / 4)
  expectSame(a, b);
  async.startEpoch(5);
  EXPECT_FALSE(at::equal(epoch(async)[0].target, a[0].target));
}

TEST(DataLoader, ResumeFromSavedStateGivesTheRemainingBatches) {
  auto data = smallImages();
  DataLoader full(data, 0, 1, LoaderOptions{8, true, true, 2, 2, 3});
  full.startEpoch(1);
  auto all = epoch(full);
  DataLoader first(data, 0, 1, LoaderOptions{8, true, true, 2, 2, 3});
  first.startEpoch(1);
  first.next();
  first.next();
  SamplerState saved = first.state();
  EXPECT_EQ(saved.position, 2);
  DataLoader resumed(data, 0, 1, LoaderOptions{8, true, true, 2, 1, 3});
  resumed.restore(saved);
  expectSame(epoch(resumed), std::vector<Batch>(all.begin() + 2, all.end()));
  EXPECT_GE(resumed.lastWaitSeconds(), 0.0);
}

}  // namespace
}  // namespace gradzip::data
