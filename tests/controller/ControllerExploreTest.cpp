// Tests of the controller's exploration race (controller/Controller.h, option
// explore_min_steps) on a real two-rank Gloo group: the Controller drives
// FakeTimedLoop (ControllerExploreTesting.h), which trains an MLP for real
// through GradSync but reports step times set per compressor, so which
// candidate is hopeless is known in advance and the number of exploration
// steps each one gets is exact. Also: measured plans compared on one
// forward+backward, the follow-up's split into base and exposed sync, a
// pinned run's trigger references, and a loop that cannot snapshot serving
// `explore: 0`.
#include "tests/controller/ControllerExploreTesting.h"
#include "controller/ControllerOptions.h"
#include "util/Yaml.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <mutex>
#include <string>

using namespace gradzip;
using gradzip::testing::decide;
using gradzip::testing::decisions;
using gradzip::testing::events;
using gradzip::testing::FakeTimedLoop;
using gradzip::testing::kSparseOnly;
using gradzip::testing::runs;
using gradzip::testing::seededMlp;

TEST(ControllerExplore, AHopelessCandidateStopsAfterExploreMinSteps) {
  // TopK measures 10 s a step against the running fp16's 0.5 s: after 2 timed
  // steps (3 calls, the first untimed) even its fastest step cannot replace
  // fp16, so it stops; TopKC (0.2 s) could, runs all 6 and is chosen.
  gradzip::testing::TempDir dir;
  const auto e = decide(dir.path(), "check_every: 5, explore_min_steps: 2", {}, kSparseOnly);
  const auto& d = e.decision;
  ASSERT_EQ(d["explored"].size(), 2u) << d.dump();
  EXPECT_EQ(e.calls.at("topk"), 3) << d.dump();
  EXPECT_EQ(e.calls.at("topkc"), 6) << d.dump();
  EXPECT_EQ(e.restores, 2);
  for (const auto& x : d["explored"]) {
    const bool topk = runs(x["plan"], "topk");
    EXPECT_EQ(x["stopped_early"].get<bool>(), topk) << x.dump();
    EXPECT_EQ(x["steps"].get<int64_t>(), topk ? 2 : 5) << x.dump();
    EXPECT_DOUBLE_EQ(x["measured_step"].get<double>(), topk ? 10.0 : 0.2) << x.dump();
    EXPECT_DOUBLE_EQ(x["fastest_step"].get<double>(), topk ? 10.0 : 0.2) << x.dump();
  }
  EXPECT_TRUE(runs(d["chosen"], "topkc")) << d.dump();
}

// The host's load fell as TopKC was explored: the running fp16's steps had
// a 0.40 s forward+backward (0.60 s a step, 0.20 s of it step − compute),
// TopKC's 0.05 s (0.30 s a step, 0.25 s of it its own). With one bucket
// forward+backward does not depend on the plan, so on one base
// (common_base, the default) TopKC is 0.05 s slower and fp16 stays; by the
// steps as measured (common_base: false) TopKC looks twice as fast and wins.
TEST(ControllerExplore, MeasuredPlansAreComparedOnOneForwardBackwardWhereNoSyncOverlapsIt) {
  const auto tune = [](FakeTimedLoop& l) {
    l.seconds_ = {{"fp16", 0.60}, {"topk", 10.0}, {"topkc", 0.30}};
    l.compute_ = {{"fp16", 0.40}, {"topkc", 0.05}};
  };
  gradzip::testing::TempDir common, own;
  const auto c = decide(common.path(), "check_every: 5", {}, kSparseOnly, 0, {}, "[engine, allgather]", {}, 0, tune);
  const auto& d = c.decision;
  EXPECT_EQ(d["chosen"], "fp16@engine") << d.dump();
  ASSERT_TRUE(d.contains("common_base")) << d.dump();
  EXPECT_NEAR(d["common_base"].get<double>(), 0.40, 1e-9);
  EXPECT_NEAR(d["current"]["time"].get<double>(), 0.60, 1e-9) << d.dump();
  bool sawTopkc = false;
  for (const auto& x : d["explored"]) {
    if (!runs(x["plan"], "topkc")) continue;
    sawTopkc = true;
    EXPECT_DOUBLE_EQ(x["measured_step"].get<double>(), 0.30) << x.dump();
    EXPECT_NEAR(x["measured_sync"].get<double>(), 0.25, 1e-9) << x.dump();
    EXPECT_NEAR(x["time"].get<double>(), 0.65, 1e-9) << x.dump();
    // The race compares on the same base: even its fastest step cannot replace fp16.
    EXPECT_TRUE(x["stopped_early"].get<bool>()) << x.dump();
    EXPECT_EQ(x["steps"].get<int64_t>(), 2) << x.dump();
  }
  EXPECT_TRUE(sawTopkc) << d.dump();
  // The references are the kept plan's step on that base and its step − compute.
  EXPECT_NEAR(d["references"]["step"].get<double>(), 0.60, 1e-9) << d.dump();
  EXPECT_NEAR(d["references"]["sync"].get<double>(), 0.20, 1e-9) << d.dump();

  const auto o = decide(own.path(), "check_every: 5, common_base: false", {}, kSparseOnly, 0, {}, "[engine, allgather]",
                        {}, 0, tune);
  EXPECT_TRUE(runs(o.decision["chosen"], "topkc")) << o.decision.dump();
  for (const auto& x : o.decision["explored"]) {
    if (runs(x["plan"], "topkc")) {
      EXPECT_FALSE(x["stopped_early"].get<bool>()) << x.dump();
    }
  }
  EXPECT_FALSE(o.decision.contains("common_base")) << o.decision.dump();
}

TEST(ControllerExplore, TheFollowupSplitsPredictionAndMeasurementIntoBaseAndExposedSync) {
  // TopKC wins the race (0.2 s a step: 0.08 s of compute and 0.02 s of
  // other work, the training thread then waits 0.1 s for the sync);
  // followup_steps (3) steps after the detectors' calibration on the new
  // plan, the follow-up logs its measured step split into base (step − that
  // wait) and exposed sync, and its prediction split the same way. 15 steps
  // cover both.
  gradzip::testing::TempDir dir;
  const auto e = decide(dir.path(), "check_every: 5, explore_min_steps: 2, followup_steps: 3", {}, kSparseOnly,
                        0, {}, "[engine, allgather]", {}, 15);
  ASSERT_TRUE(runs(e.decision["chosen"], "topkc")) << e.decision.dump();
  const auto followups = events(dir.path(), "followup");
  ASSERT_EQ(followups.size(), 1u);
  const auto& f = followups[0];
  EXPECT_EQ(f["decision_step"], 5) << f.dump();
  EXPECT_EQ(f["plan"], e.decision["chosen"]) << f.dump();
  EXPECT_DOUBLE_EQ(f["measured_step"].get<double>(), 0.2) << f.dump();
  EXPECT_NEAR(f["measured_base"].get<double>(), 0.1, 1e-12) << f.dump();
  EXPECT_NEAR(f["measured_exposed"].get<double>(), 0.1, 1e-12) << f.dump();
  // The chosen candidate's screened prediction, as the decision logged it.
  const auto& cands = e.decision["candidates"];
  const auto c = std::find_if(cands.begin(), cands.end(), [&](const auto& x) { return x["plan"] == f["plan"]; });
  ASSERT_NE(c, cands.end()) << e.decision.dump();
  EXPECT_DOUBLE_EQ(f["predicted_step"].get<double>(), (*c)["predicted_step"].get<double>()) << f.dump();
  EXPECT_DOUBLE_EQ(f["predicted_exposed"].get<double>(), (*c)["exposed"].get<double>()) << f.dump();
  EXPECT_NEAR(f["predicted_base"].get<double>() + f["predicted_exposed"].get<double>(),
              f["predicted_step"].get<double>(), 1e-12)
      << f.dump();
  // The base is the running fp16's measured steps minus their 0.4 s wait.
  EXPECT_NEAR(f["predicted_base"].get<double>(), e.decision["base_step"].get<double>(), 1e-12) << f.dump();
}

TEST(ControllerExplore, PinnedTheTriggerReferencesAreThePinsOwnSteps) {
  // Pinned to fp16 (0.5 s a step), the decision still explores and would
  // pick TopKC (0.2 s), but fp16 keeps running: the step-time references
  // are fp16's own steps (0.5 s, 0.42 s of it after compute), not TopKC's
  // 0.2 s, against which every pinned step would look 150% slower and call
  // a step-time decision within the next checks; and no follow-up compares
  // TopKC's prediction with fp16's steps. 15 steps after the decision.
  gradzip::testing::TempDir dir;
  const auto e = decide(dir.path(),
                        "check_every: 5, explore_min_steps: 2, followup_steps: 3,"
                        " pin: {name: fp16, collective: engine}",
                        {}, kSparseOnly, 0, {}, "[engine, allgather]", {}, 15);
  const auto& d = e.decision;
  EXPECT_TRUE(d["pinned"].get<bool>()) << d.dump();
  EXPECT_TRUE(runs(d["chosen"], "topkc")) << d.dump();
  EXPECT_DOUBLE_EQ(d["references"]["step"].get<double>(), 0.5) << d.dump();
  EXPECT_TRUE(events(dir.path(), "followup").empty());
}

TEST(ControllerExplore, WithoutExplorationOrRewindTheLoopIsOnlyStepped) {
  // explore = 0 and provisional_rewind: false (set in the options directly:
  // `explore` in YAML takes 1 to 64): the provisional step (step 2) and the
  // decisions run on predictions alone, so a loop that cannot keep its state
  // in memory (canSnapshot_ false: any snapshot, restore or exploreStep
  // fails the test) serves the controller from begin() through 30 steps of
  // trigger checks.
  gradzip::testing::TempDir dir;
  std::mutex mu;
  gradzip::testing::runRanks(
      2,
      [&](comm::Communicator& c) {
        auto model = seededMlp(mu);
        auto r = YamlReader::loadString(
            "{families: [fp16, topkc], collectives: [engine], topkc_bits: [2], warmup_steps: 5,"
            " provisional_step: 2, provisional_rewind: false, check_every: 1, min_interval: 5,"
            " network_interval: 2, probe: {budget_seconds: 0.3}}",
            "loop.yaml");
        auto opts = trainer::ControllerOptions::fromYaml(r);
        opts.explore = 0;
        FakeTimedLoop loop(c, model);
        loop.canSnapshot_ = false;
        trainer::Controller controller(opts, c, loop.sync(), dir.path());
        controller.start(0);
        controller.begin(0, loop);
        EXPECT_FALSE(controller.mayRewind());
        for (int64_t s = 1; s <= 30; ++s) {
          if (s == 15) loop.seconds_ = {{"fp16", 2.0}, {"topkc", 0.2}};  // a step-time change to decide on
          controller.afterStep(s, loop.step(), loop);
        }
        controller.finish();
        EXPECT_GE(controller.decisions(), 1);
        EXPECT_TRUE(loop.explored_.empty());
        EXPECT_EQ(loop.restores_, 0);
      },
      std::chrono::seconds(60));
  EXPECT_EQ(events(dir.path(), "provisional").size(), 1u);
  for (const auto& d : decisions(dir.path())) EXPECT_TRUE(d["explored"].empty()) << d.dump();
}

TEST(ControllerExplore, WithoutTheRaceEveryCandidateRunsExploreSteps) {
  gradzip::testing::TempDir dir;
  const auto e = decide(dir.path(), "check_every: 5, explore_min_steps: 0", {}, kSparseOnly);
  EXPECT_EQ(e.calls.at("topk"), 6) << e.decision.dump();
  EXPECT_EQ(e.calls.at("topkc"), 6) << e.decision.dump();
  for (const auto& x : e.decision["explored"]) EXPECT_FALSE(x["stopped_early"].get<bool>()) << x.dump();
  EXPECT_TRUE(runs(e.decision["chosen"], "topkc")) << e.decision.dump();
}
