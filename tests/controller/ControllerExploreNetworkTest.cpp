// Tests of the controller's network-type and sharp-slowdown decisions
// (controller/Controller.h) over FakeTimedLoop (ControllerExploreTesting.h) on
// a real two-rank Gloo group: a network decision explores only what could
// replace the predicted knee; a sharp slowdown, whose collectives slow down
// too, is decided at once and reuses screenings younger than min_interval;
// a slower step whose collectives are not slower is not sharp; and a sharp
// slowdown after a decision that measured its plan does not wait out
// network_interval.
#include "tests/controller/ControllerExploreTesting.h"
#include "controller/ControllerOptions.h"
#include "controller/Pareto.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

using namespace gradzip;
using gradzip::testing::decide;
using gradzip::testing::decisions;
using gradzip::testing::kRingOnly;

TEST(ControllerExplore, ANetworkDecisionExploresOnlyWhatCouldReplaceThePredictedKnee) {
  // After the first decision the running plan's steps slow down 10x, all of
  // it synchronisation: a network-type decision, where the running plan's
  // steps straddle the change and the knee of the predicted front (at the
  // refitted α and β) is the bar, explore_margin slower. Which way it goes
  // depends on loopback's timings; each way must follow the rule, checked
  // against the logged predictions under the run's statistical cost:
  //  - kept: the running plan could replace that bar; nothing explored;
  //  - adopted: no other candidate could; the knee chosen, nothing explored;
  //  - otherwise only candidates that could replace the bar are explored
  //    (not the knee, which stands for itself with its predicted point, nor
  //    the running plan), and the knee of those and the predicted knee is
  //    chosen.
  // Two worlds: TopKC running among fp16 and TopK, and fp16 running against
  // bf16, its twin in the predictions.
  struct World {
    std::string families;
    std::map<std::string, double> then;
  };
  for (const World& w : {World{"[fp16, topk, topkc]", {{"fp16", 0.5}, {"topk", 10.0}, {"topkc", 5.0}}},
                         World{"[fp16, bf16]", {{"fp16", 5.0}, {"bf16", 5.0}}}}) {
    SCOPED_TRACE(w.families);
    gradzip::testing::TempDir dir;
    const auto e = decide(dir.path(), "check_every: 5, explore_min_steps: 2, network_interval: 10", w.then, w.families);
    const auto& d = e.decision;
    // A sounding trigger is network-type too: the first sounding after the
    // first decision can find loopback much faster than the probe's model.
    ASSERT_TRUE(d["trigger"] == "step_time" || d["trigger"] == "network" || d["trigger"] == "sounding") << d.dump();
    if (d.contains("remeasure")) {
      // The bandwidth soundings (TopKC on the MLP moves a few hundred bytes
      // a step: latency-bound) found the link unchanged: the running plan's
      // steps still hold and are the bar, as at any other decision.
      std::cout << w.families << ": " << d["remeasure"].get<std::string>() << "\n";
      EXPECT_FALSE(d.contains("predicted_knee")) << d.dump();
      continue;
    }
    const auto opts = trainer::ControllerOptions{};  // ef_rate, time_weight 0.85, explore_margin 0.05
    std::vector<trainer::Objectives> pts;
    size_t running = d["candidates"].size();
    for (size_t i = 0; i < d["candidates"].size(); ++i) {
      const auto& c = d["candidates"][i];
      if (c["plan"] == d["current"]["plan"]) running = i;
      pts.push_back(c["ok"].get<bool>()
                        ? trainer::Objectives{c["predicted_step"].get<double>(),
                                              trainer::statisticalCost(opts, trainer::planFromKey(c["plan"]),
                                                                       c["vnmse"].get<double>(),
                                                                       c["gain"].get<double>())}
                        : trainer::Objectives{INFINITY, INFINITY});
    }
    ASSERT_LT(running, pts.size()) << d.dump();
    const size_t knee = opts.kneeOf(pts);  // the controller's knee, time_tolerance included
    const trainer::Objectives bar{pts[knee].time * (1 + opts.exploreMargin), pts[knee].stat};
    auto challenges = [&](size_t i) {
      return trainer::couldReplace(bar, pts[i], 0.0, opts.timeWeight, opts.kneeScale());
    };
    const bool keep = running == knee || challenges(running);
    std::cout << w.families << ": " << (keep ? "kept" : d.contains("adopted") ? "adopted" : "explored") << " "
              << d["chosen"].get<std::string>() << "\n";
    EXPECT_EQ(d.contains("kept"), keep) << d.dump();
    if (keep) {
      EXPECT_EQ(d["chosen"], d["current"]["plan"]) << d.dump();
      EXPECT_EQ(d["references"]["measured"], true) << d.dump();  // its own steps
      EXPECT_TRUE(d["explored"].empty()) << d.dump();
      EXPECT_TRUE(e.calls.empty()) << d.dump();
      EXPECT_EQ(e.restores, 0);
      continue;
    }
    bool anyChallenger = false;
    for (size_t i = 0; i < pts.size(); ++i)
      anyChallenger = anyChallenger || (i != knee && i != running && challenges(i));
    if (d.contains("adopted")) {
      EXPECT_FALSE(anyChallenger) << d.dump();
      EXPECT_EQ(d["chosen"], d["candidates"][knee]["plan"]) << d.dump();
      EXPECT_EQ(d["references"]["measured"], false) << d.dump();  // its prediction
      EXPECT_TRUE(d["explored"].empty()) << d.dump();
      EXPECT_TRUE(e.calls.empty()) << d.dump();
      EXPECT_EQ(e.restores, 0);
      continue;
    }
    ASSERT_GE(d["explored"].size(), 1u) << d.dump();
    ASSERT_TRUE(d.contains("predicted_knee")) << d.dump();
    EXPECT_EQ(d["predicted_knee"]["plan"], d["candidates"][knee]["plan"]) << d.dump();
    EXPECT_DOUBLE_EQ(d["predicted_knee"]["predicted_step"].get<double>(), pts[knee].time) << d.dump();
    for (const auto& x : d["explored"]) {
      const auto key = x["plan"].get<std::string>();
      EXPECT_NE(key, d["current"]["plan"]) << d.dump();
      EXPECT_NE(key, d["candidates"][knee]["plan"]) << d.dump();
      for (size_t i = 0; i < pts.size(); ++i) {
        if (d["candidates"][i]["plan"] == key) {
          EXPECT_TRUE(challenges(i)) << key << " " << d.dump();
        }
      }
    }
    EXPECT_EQ(e.restores, int(d["explored"].size()));
    // The choice is the predicted knee or an explored challenger, never the
    // running plan (its steps straddle the change).
    bool known = d["chosen"] == d["candidates"][knee]["plan"];
    for (const auto& x : d["explored"]) known = known || d["chosen"] == x["plan"];
    EXPECT_TRUE(known) << d.dump();
    // An explored plan's references are its explored steps; the predicted
    // knee's its prediction (and a slowdown after it waits network_interval).
    EXPECT_EQ(d["references"]["measured"], d["chosen"] != d["candidates"][knee]["plan"]) << d.dump();
  }
}

namespace {

// The sharp-slowdown world of the tests below: fp16 and bf16 over gradzip's
// ring at 0.5 s a step until step 17, then 5 s, with every send held back by
// `startDelay` from the start and by `delay` from step 17; `options` go after
// check_every 1 and network_interval 1. The decisions of the run; it must
// take exactly two. kCalmDelay, the default start, makes the collectives
// before the change take milliseconds, so a loaded host's scheduling noise
// (ctest runs two tests at once) cannot move the ratio detector's median
// 1.6x before step 17; on sub-millisecond loopback collectives it did, and
// the step-20 decision was labelled a network one (1 run in 6 with two
// busy loops beside it).
constexpr std::chrono::microseconds kCalmDelay = std::chrono::milliseconds(5);

std::vector<nlohmann::json> sharpSlowdown(const std::string& dir, const std::string& options,
                                          std::chrono::microseconds delay,
                                          std::chrono::microseconds startDelay = kCalmDelay) {
  decide(dir, kRingOnly + "check_every: 1, network_interval: 1, explore_min_steps: 2" + options,
         {{"fp16", 5.0}, {"bf16", 5.0}}, "[fp16, bf16]", 12, delay, "[ring]", startDelay);
  auto d = decisions(dir);
  EXPECT_EQ(d.size(), 2u);
  return d;
}

}  // namespace

TEST(ControllerExplore, ASharpSlowdownDecidesAtOnceAndReusesTheScreenings) {
  // fp16 and bf16 over gradzip's ring at 0.5 s a step (0.4 s of it
  // synchronisation) until step 17, then 5 s: step − compute rises by 4.5 s,
  // far over kSevere (30%) of the 0.5 s the step-5 decision measured, and
  // every send is held back 50 ms instead of 5 ms (kCalmDelay), so the
  // collectives are over 1.6x (1 + 2·network_drift) their reference in each
  // step. Checked every step, the second
  // slow step (19) calls a step-time decision at once, before the medians of
  // the last 9 steps have moved (without this rule it came at step 25); the
  // verdict travels during step 20 and that check acts on it (the pipelined
  // check), with β from the last 2 steps' collectives alone ("beta_steps": 2).
  // The decision at step 5 screened every candidate afresh; the network-type
  // decision at step 20 reuses those screenings (encode/decode seconds, bits and
  // statistics equal, bit for bit): they are within min_interval (200).
  // The running plan's measured step there is that of the 2 slow steps.
  gradzip::testing::TempDir dir;
  const auto d = sharpSlowdown(dir.path(), "", std::chrono::milliseconds(50));
  ASSERT_EQ(d.size(), 2u);
  const auto& first = d[0];
  const auto& second = d[1];
  EXPECT_EQ(first["step"], 5) << first.dump();
  EXPECT_FALSE(first.contains("screening")) << first.dump();
  EXPECT_EQ(second["step"], 20) << second.dump();
  EXPECT_EQ(second["trigger"], "step_time") << second.dump();
  EXPECT_EQ(second["beta_steps"], 2) << second.dump();
  EXPECT_EQ(second["screening"], "reused from the decision at step 5") << second.dump();
  // The running plan's own step, should it stay: its 2 slow steps, not the
  // median of 9 that straddle the change (0.5 s).
  EXPECT_DOUBLE_EQ(second["current"]["measured_step"].get<double>(), 5.0) << second.dump();
  ASSERT_EQ(first["candidates"].size(), second["candidates"].size());
  for (size_t i = 0; i < first["candidates"].size(); ++i) {
    const auto& a = first["candidates"][i];
    const auto& b = second["candidates"][i];
    EXPECT_EQ(a["plan"], b["plan"]);
    EXPECT_EQ(a["encode_decode"], b["encode_decode"]) << a.dump() << " " << b.dump();
    EXPECT_EQ(a["bits"], b["bits"]) << a.dump() << " " << b.dump();
    EXPECT_EQ(a["vnmse"], b["vnmse"]) << a.dump() << " " << b.dump();
  }
}

TEST(ControllerExplore, ScreeningsOlderThanMinIntervalAreNotReused) {
  // The same slowdown with min_interval 10: the screenings of step 5 are 15
  // steps old at the step-20 decision, so it screens every candidate afresh.
  gradzip::testing::TempDir dir;
  const auto d = sharpSlowdown(dir.path(), ", min_interval: 10", std::chrono::milliseconds(50));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1]["step"], 20) << d[1].dump();
  EXPECT_FALSE(d[1].contains("screening")) << d[1].dump();
}

TEST(ControllerExplore, ASlowerStepWhoseCollectivesAreNotSlowerIsNotSharp) {
  // The step times of the tests above, every send held back 10 ms from the
  // start to the end: the host, not the link, slowed down, and nothing is
  // decided before the medians of 9 steps have moved (step 22 at the
  // earliest). The delay makes each collective ~20 ms, so a loaded host's
  // scheduling noise (ctest runs two tests at once) stays well under the
  // 1.6x that would make the collectives look slower; without it their
  // sub-millisecond loopback times once did for 3 steps in a row.
  gradzip::testing::TempDir dir;
  const auto d = sharpSlowdown(dir.path(), "", std::chrono::milliseconds(10), std::chrono::milliseconds(10));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_GE(d[1]["step"], 22) << d[1].dump();
  EXPECT_FALSE(d[1].contains("beta_steps")) << d[1].dump();
}

TEST(ControllerExplore, ASharpSlowdownAfterADecisionThatMeasuredItsPlanDoesNotWaitOutNetworkInterval) {
  // The sharp slowdown of the first test at the default network_interval
  // (30 steps): the step-5 decision kept or explored the plan it runs, so its
  // references are measured steps, and the slowdown from step 18 is acted on
  // at step 20, 15 steps after it (without the rule: at step 36, once
  // network_interval had passed and the medians had moved).
  gradzip::testing::TempDir dir;
  decide(dir.path(), kRingOnly + "check_every: 1, explore_min_steps: 2", {{"fp16", 5.0}, {"bf16", 5.0}},
         "[fp16, bf16]", 12, std::chrono::milliseconds(50), "[ring]", kCalmDelay);
  const auto d = decisions(dir.path());
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0]["chosen"], "fp16@ring") << d[0].dump();  // kept: its own steps are the references
  EXPECT_EQ(d[0]["references"]["measured"], true) << d[0].dump();
  EXPECT_EQ(d[1]["step"], 20) << d[1].dump();
  EXPECT_EQ(d[1]["beta_steps"], 2) << d[1].dump();
}
