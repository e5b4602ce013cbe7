// Tests controller/WorkAhead.h: every index runs exactly once whatever the
// number of threads, background workers make progress before the owner
// joins (and none exist without them), and destruction finishes the work.
#include "controller/WorkAhead.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

using gradzip::trainer::WorkAhead;

TEST(WorkAhead, RunsEveryIndexExactlyOnce) {
  for (const size_t n : {size_t(0), size_t(1), size_t(257)}) {
    for (const int background : {0, 1, 3, 8}) {
      std::vector<std::atomic<int>> runs(n);
      std::vector<std::thread::id> by(n);
      WorkAhead w(n, background, [&](size_t i) {
        runs[i].fetch_add(1);
        by[i] = std::this_thread::get_id();
      });
      w.finish();
      EXPECT_EQ(w.done(), n);
      w.finish();  // idempotent
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << "index " << i << ", " << background;
      if (background == 0) {  // the owner's thread alone
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(by[i], std::this_thread::get_id());
      }
    }
  }
}

TEST(WorkAhead, BackgroundWorkersRunBeforeTheOwnerJoins) {
  // Item 0 signals when it runs: with one background worker it does before
  // finish() is called (a hang here fails at the timeout); without one,
  // nothing has run until finish().
  std::promise<void> ran;
  auto ranFuture = ran.get_future();
  std::atomic<int> count{0};
  WorkAhead ahead(4, 1, [&](size_t i) {
    if (i == 0) ran.set_value();
    count.fetch_add(1);
  });
  ASSERT_EQ(ranFuture.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ahead.finish();
  EXPECT_EQ(count.load(), 4);

  std::atomic<int> lazy{0};
  WorkAhead none(4, 0, [&](size_t) { lazy.fetch_add(1); });
  EXPECT_EQ(none.done(), 0u);
  EXPECT_EQ(lazy.load(), 0);
  none.finish();
  EXPECT_EQ(lazy.load(), 4);
}

TEST(WorkAhead, WorkersAddedLaterTakeWhatIsLeft) {
  // One background worker, then a second (ensureWorkers(2)): whichever
  // takes item 0 holds it until item 1 has run, which the other must do
  // before the owner joins (a hang fails at the timeouts).
  std::promise<void> second;
  const std::shared_future<void> secondRan = second.get_future().share();
  std::atomic<int> count{0};
  WorkAhead w(3, 1, [&](size_t i) {
    if (i == 0) {
      EXPECT_EQ(secondRan.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    }
    if (i == 1) second.set_value();
    count.fetch_add(1);
  });
  w.ensureWorkers(2);
  ASSERT_EQ(secondRan.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  w.finish();
  EXPECT_EQ(count.load(), 3);
}

TEST(WorkAhead, AnExceptionReachesTheOwnerAfterTheOtherIndicesRan) {
  for (const int background : {0, 2}) {
    std::atomic<int> count{0};
    WorkAhead w(20, background, [&](size_t i) {
      if (i == 3) throw std::runtime_error("boom at 3");
      count.fetch_add(1);
    });
    EXPECT_THROW(w.finish(), std::runtime_error) << background;
    if (background > 0) {
      EXPECT_EQ(count.load(), 19);  // the other workers took what the failed one left
    }
    w.finish();  // the rest when the owner was alone; nothing is rethrown twice
    EXPECT_EQ(count.load(), 19) << background;
  }
}

TEST(WorkAhead, DestructionFinishesTheWork) {
  std::atomic<int> count{0};
  {
    WorkAhead w(50, 2, [&](size_t) { count.fetch_add(1); });
  }
  EXPECT_EQ(count.load(), 50);
}
