// Tests of the controller's decisions in real training (controller/
// Controller.h, on two Gloo thread ranks): every rank runs the same plan at
// every step, explored ones included, and each decision logs its inputs, with
// the gradient noise scale every 10 steps; the warm-up leaves fp16 at the
// provisional step for the knee of the predicted front unless fp16 is within
// explore_margin of it (recomputed here from the logged predictions); and gain
// decisions explore only the side the gain moved to, within gain_scope.
#include "tests/controller/ControllerTesting.h"
#include "controller/Candidates.h"
#include "controller/ControllerOptions.h"
#include "controller/Pareto.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace gradzip;
using gradzip::testing::config;
using gradzip::testing::expectTheSameStepsOnEveryRank;
using gradzip::testing::jsonLines;

TEST_F(ControllerTrainTest, AllRanksRunTheSamePlans) {
  // Every rank ran the same plan at every step it trained, the steps that
  // exploration undid included (expectTheSameStepsOnEveryRank). From TopK
  // 0.1% (no provisional step) with time_weight 0, the first decision (step
  // 5) explores whatever the host's load: fp16, the knee, and the next
  // configuration (lower statistical cost), and moves to the one measured best.
  const int64_t last = 40;
  const std::string initial = "topk{ratio: 0.001}@allgather";
  auto cfg = config(dir.path(),
                    "{name: auto, initial: {name: topk, collective: allgather, topk: {ratio: 0.001}},"
                    " families: [fp16, topk, topkc, cnat], warmup_steps: 5, provisional_step: 0, min_interval: 10,"
                    " check_every: 5, gain_drift: 0.001, explore: 2, explore_steps: 2, time_weight: 0,"
                    " noise_every: 10, probe: {budget_seconds: 0.5}}",
                    last);
  train(cfg);
  const auto r0 = jsonLines(cfg.runDir() + "/rank0/plans.jsonl"), r1 = jsonLines(cfg.runDir() + "/rank1/plans.jsonl");
  ASSERT_GE(r0.size(), 2u);  // the starting plan, then one line per switch: at least step 5's
  EXPECT_EQ(r0, r1);
  EXPECT_EQ(r0[0]["plan"], initial);
  EXPECT_EQ(r0[1]["step"], 5);
  const auto undone = expectTheSameStepsOnEveryRank(cfg.runDir(), last);
  ASSERT_FALSE(undone.empty());
  EXPECT_EQ(undone[0]["step"], 5);
  EXPECT_EQ(undone[0]["by"], "exploration");
  EXPECT_EQ(jsonLines(cfg.runDir() + "/tta.jsonl").size(), size_t(last / 10));
  int decisions = 0, noiseRecords = 0;
  double noiseGradSq = 0, noiseTrace = 0;
  for (const auto& r : jsonLines(cfg.runDir() + "/decisions.jsonl")) {
    if (r["event"] == "start") {
      EXPECT_EQ(r["plan"], initial);
    }
    if (r["event"] == "noise") {
      // The gradient noise scale at steps 10, 20, 30, 40: the ranks' mean
      // squared norm is at least that of their mean (Jensen), so tr(Σ) >= 0,
      // and b_simple is the running Σ tr(Σ) / Σ |G|² of the records so far.
      EXPECT_EQ(r["step"].get<int64_t>() % 10, 0);
      EXPECT_EQ(r["batch"].get<int64_t>(), cfg.data.batchSize);
      EXPECT_EQ(r["world_size"], 2);
      EXPECT_GE(r["trace"].get<double>(), 0.0) << r.dump();
      EXPECT_GT(r["seconds"].get<double>(), 0.0);  // charged to training time, as soundings
      noiseGradSq += r["grad_sq"].get<double>();
      noiseTrace += r["trace"].get<double>();
      ++noiseRecords;
      if (noiseGradSq > 0)
        EXPECT_NEAR(r["b_simple"].get<double>(), noiseTrace / noiseGradSq, 1e-9 * noiseTrace / noiseGradSq);
      else
        EXPECT_TRUE(r["b_simple"].is_null()) << r.dump();
    }
    if (r["event"] != "decision") continue;
    ++decisions;
    // Its inputs are logged: the network, every candidate's prediction, the front.
    EXPECT_GT(r["beta"].get<double>(), 0);
    EXPECT_EQ(r["candidates"].size(), trainer::makeCandidates(*cfg.controller).size());
    EXPECT_FALSE(r["front"].empty());
    EXPECT_EQ(r["geometry"], "gradient");  // SGD: one factor for every coordinate
    // The explored candidates are different compressors (one collective each),
    // besides the running plan, which network decisions re-measure.
    std::set<std::string> compressors;
    for (const auto& e : r["explored"]) {
      const auto key = e["plan"].get<std::string>();
      if (key == r["current"]["plan"]) continue;
      EXPECT_TRUE(compressors.insert(key.substr(0, key.find('@'))).second) << r.dump();
    }
  }
  EXPECT_GE(decisions, 1);
  EXPECT_EQ(noiseRecords, 4);
}

namespace {

// The plan the provisional step `p` (its decisions.jsonl record) must have
// chosen, recomputed from its logged predictions and vNMSEs under the run's
// statistical cost, after checking it chose that: the knee of the predicted
// front, unless `initial`, predicted too, is within explore_margin of it
// (then "kept" says so). Returns the plan's key.
std::string expectedProvisional(const trainer::TrainConfig& cfg, const nlohmann::json& p, const std::string& initial) {
  const auto& o = *cfg.controller;
  EXPECT_EQ(p["candidates"].size(), trainer::makeCandidates(o).size());
  std::vector<trainer::Objectives> pts;
  size_t self = p["candidates"].size();
  for (const auto& c : p["candidates"]) {
    if (c["plan"] == initial) self = pts.size();
    const bool ok = c["ok"].get<bool>() && c["vnmse"].is_number();
    pts.push_back(ok ? trainer::Objectives{c["predicted_step"].get<double>(),
                                           trainer::statisticalCost(o, trainer::planFromKey(c["plan"]),
                                                                    c["vnmse"].get<double>(), c["gain"].get<double>())}
                     : trainer::Objectives{INFINITY, INFINITY});
  }
  EXPECT_LT(self, pts.size()) << initial << " is not among the candidates";
  if (self >= pts.size()) return "";
  const size_t knee = o.kneeOf(pts);
  const bool replaces =
      knee != self && trainer::couldReplace(pts[self], pts[knee], o.exploreMargin, o.timeWeight, o.kneeScale());
  const size_t chosen = replaces ? knee : self;
  std::cout << "provisional step: knee " << p["candidates"][knee]["plan"] << ", " << initial << " predicted "
            << pts[self].time << " s against " << pts[knee].time << " s\n";
  EXPECT_EQ(p["chosen"], p["candidates"][chosen]["plan"]) << p.dump();
  EXPECT_EQ(p.contains("kept"), knee != self && !replaces) << p.dump();
  EXPECT_EQ(p["predicted_step"], p["candidates"][chosen]["predicted_step"]);
  return p["candidates"][chosen]["plan"];
}

}  // namespace

TEST_F(ControllerTrainTest, WarmupLeavesFp16ForThePredictedKneeAtTheProvisionalStep) {
  // After step 2 rank 0 screens every candidate and all ranks run the knee of
  // the predicted front, or stay on fp16 if it is predicted within
  // explore_margin of the knee (recomputed here from the logged predictions
  // and vNMSEs under the run's statistical cost) until the first decision at
  // step 10, which measures that plan as the running one, reusing the
  // provisional screenings. With provisional_step 0 the warm-up stays on
  // fp16 and the first decision screens. Either way α comes from the start-up
  // probe and β at step 2 (kStartBetaSteps), and both are training time.
  const std::string opts =
      "families: [fp16, topk, topkc], warmup_steps: 10, check_every: 10, min_interval: 100, explore: 1,"
      " explore_steps: 2, probe: {budget_seconds: 0.5}";
  auto cfg = config(dir.path() + "/on", "{name: auto, " + opts + "}", 12);
  train(cfg);
  const auto log = jsonLines(cfg.runDir() + "/decisions.jsonl");
  std::vector<nlohmann::json> provisional, decisions, start, beta;
  for (const auto& r : log) {
    if (r["event"] == "provisional") provisional.push_back(r);
    if (r["event"] == "decision") decisions.push_back(r);
    if (r["event"] == "start") start.push_back(r);
    if (r["event"] == "beta") beta.push_back(r);
  }
  ASSERT_EQ(provisional.size(), 1u);
  ASSERT_EQ(decisions.size(), 1u);
  ASSERT_EQ(start.size(), 1u);
  ASSERT_EQ(beta.size(), 1u);
  EXPECT_TRUE(start[0]["beta"].is_null());
  EXPECT_GT(start[0]["alpha"].get<double>(), 0);
  EXPECT_EQ(beta[0]["step"], 2);
  EXPECT_GT(beta[0]["beta"].get<double>(), 0);
  // No network trigger in between: β as measured at step 2, or the running
  // plan's collectives' where slower (Controller::decide).
  EXPECT_GE(decisions[0]["beta"].get<double>(), beta[0]["beta"].get<double>());
  // Training time: the first TTA row (steps 1-10) holds its steps, the
  // start-up probe and β, the provisional screening and the decision.
  const auto rows = jsonLines(cfg.runDir() + "/tta.jsonl");
  ASSERT_FALSE(rows.empty());
  ASSERT_EQ(rows[0]["step"], 10);
  EXPECT_GE(rows[0]["train_seconds"].get<double>(),
            10 * rows[0]["breakdown"]["step"].get<double>() + start[0]["seconds"].get<double>() +
                beta[0]["seconds"].get<double>() + provisional[0]["seconds"].get<double>());
  const auto& p = provisional[0];
  EXPECT_EQ(p["step"], 2);
  EXPECT_EQ(decisions[0]["step"], 10);
  // The decision reused the provisional screenings: the same codec times.
  EXPECT_EQ(decisions[0]["screening"], "reused from the provisional step 2");
  ASSERT_EQ(decisions[0]["candidates"].size(), p["candidates"].size());
  for (size_t i = 0; i < p["candidates"].size(); ++i)
    EXPECT_EQ(decisions[0]["candidates"][i]["encode_decode"], p["candidates"][i]["encode_decode"]) << i;
  const std::string chosen = expectedProvisional(cfg, p, "fp16@engine");
  std::cout << "provisional plan at step 2: " << chosen << "; the step-10 decision chose "
            << decisions[0]["chosen"].get<std::string>() << "\n";
  EXPECT_EQ(decisions[0]["current"]["plan"], chosen);  // the first decision measured it as the running plan
  const auto r0 = jsonLines(cfg.runDir() + "/rank0/plans.jsonl"), r1 = jsonLines(cfg.runDir() + "/rank1/plans.jsonl");
  EXPECT_EQ(r0, r1);
  if (chosen != "fp16@engine") {  // the two fp16 steps were undone (provisional_rewind)
    ASSERT_GE(r0.size(), 2u);
    EXPECT_EQ(r0[1]["step"], 0);
    EXPECT_EQ(r0[1]["plan"], chosen);
    EXPECT_EQ(p["rewound"]["steps"], 2);
  } else {
    EXPECT_FALSE(p.contains("rewound"));  // nothing to undo: fp16 goes on
  }

  auto off = config(dir.path() + "/off", "{name: auto, provisional_step: 0, " + opts + "}", 12);
  train(off);
  int offDecisions = 0;
  for (const auto& r : jsonLines(off.runDir() + "/decisions.jsonl")) {
    EXPECT_NE(r["event"], "provisional");
    if (r["event"] != "decision") continue;
    ++offDecisions;
    EXPECT_EQ(r["current"]["plan"], "fp16@engine");
    EXPECT_FALSE(r.contains("screening"));  // nothing to reuse: screened afresh
  }
  EXPECT_EQ(offDecisions, 1);

  // From fp32 among fp32, fp16 and bf16, whose statistical costs are all
  // near 0: the half-width knee replaces fp32 only if it saves more than
  // explore_margin of the step (which happens depends on the machine's
  // loopback; the rule is checked either way).
  auto wide = config(dir.path() + "/fp32",
                     "{name: auto, initial: {name: fp32}, families: [fp32, fp16, bf16], warmup_steps: 10,"
                     " probe: {budget_seconds: 0.5}}",
                     4);
  train(wide);
  int wideProvisional = 0;
  for (const auto& r : jsonLines(wide.runDir() + "/decisions.jsonl"))
    if (r["event"] == "provisional") {
      ++wideProvisional;
      expectedProvisional(wide, r, "fp32@engine");
    }
  EXPECT_EQ(wideProvisional, 1);
}

TEST_F(ControllerTrainTest, GainDecisionsFollowTheGain) {
  // Pinned to TopK 1.1% (measured and decided, never switched, so the run
  // does not depend on which plan loopback's timings favour), whose
  // error-feedback residual moves its gain: with gain_drift 0.1% a gain
  // decision comes once the gain has settled (50 steps on the plan); network
  // decisions, which loopback's timing noise would call, are off. It may
  // explore only TopK ratios on the side its gain moved to (Pareto.h
  // followGain), judged by the screened vNMSE on the same gradient: not 1.1%
  // through another collective, and after a fall not 0.4% or 0.1%. fp16 and
  // bf16 compress less than any TopK, so after a fall only gain_scope keeps
  // them out: the same run with `gain_scope: all` must explore one of them.
  // time_weight 0 makes the choice of what to explore independent of
  // loopback's millisecond timings: every plan with a lower statistical cost
  // could replace the running one, the lowest first. `stat: vnmse`: the
  // logged screened_cost is then the vNMSE this test reads per candidate.
  std::map<std::string, int> otherFamilies;  // per gain_scope: explored plans that are not TopK
  for (const std::string scope : {"family", "all"}) {
    auto cfg = config(dir.path() + "/" + scope,
                      "{name: auto, pin: {name: topk, collective: allgather, topk: {ratio: 0.011}},"
                      " families: [topk, fp16, bf16], gain_scope: " + scope + ", warmup_steps: 5,"
                      " min_interval: 10, check_every: 5, gain_drift: 0.001, network_drift: 10, sound_every: 0,"
                      " explore: 2, explore_steps: 2, time_weight: 0, stat: vnmse, probe: {budget_seconds: 0.5}}",
                      100);
    train(cfg);
    int gainDecisions = 0, explored = 0;
    std::string decisions;  // step, trigger and choice of each, for the failure message
    int floored = 0;  // decisions that priced the running plan at its screening
    for (const auto& r : jsonLines(cfg.runDir() + "/decisions.jsonl")) {
      if (r["event"] == "decision")
        decisions += r["step"].dump() + " " + r["trigger"].dump() + " " + r["chosen"].dump() + "; ";
      if (r["event"] != "decision") continue;
      // The running plan's cost (stat: vnmse) is what it measured once it has
      // run min_interval (10) steps, and before that at least its screened
      // vNMSE (8 replays of the gradient: its residual's steady state).
      const auto& cur = r["current"];
      const bool settled = cur["steps_on_plan"].get<int64_t>() >= 10;
      EXPECT_EQ(r["current_settled"].get<bool>(), settled) << r["step"];
      double screenedOwn = NAN;
      for (const auto& c : r["candidates"])
        if (c["plan"] == cur["plan"] && c["ok"].get<bool>()) screenedOwn = c["vnmse"].get<double>();
      if (settled) {
        EXPECT_EQ(cur["cost"].get<double>(), cur["vnmse"].get<double>()) << r["step"];
      } else {
        ASSERT_TRUE(std::isfinite(screenedOwn)) << r["step"];
        EXPECT_EQ(cur["cost"].get<double>(), std::max(cur["vnmse"].get<double>(), screenedOwn)) << r["step"];
        floored += screenedOwn > cur["vnmse"].get<double>();
      }
      if (r["trigger"] != "gain") continue;
      EXPECT_TRUE(settled) << r["step"];  // min_interval after the last decision
      ++gainDecisions;
      ASSERT_TRUE(r.contains("direction")) << r.dump();
      EXPECT_EQ(r["direction"]["scope"], scope);
      const double change = r["direction"]["gain_change"].get<double>();
      const double own = r["direction"]["screened_cost"].get<double>();
      EXPECT_NE(change, 0.0);
      EXPECT_EQ(r["direction"]["towards"], change < 0 ? "less compression" : "more compression");
      std::map<std::string, double> screened;
      for (const auto& c : r["candidates"]) {
        if (c["ok"].get<bool>()) screened[c["plan"].get<std::string>()] = c["vnmse"].get<double>();
        // Under "family" only TopK's grid is screened (no other plan can be
        // chosen); under "all" every candidate is.
        const bool topk = c["plan"].get<std::string>().rfind("topk{", 0) == 0;
        EXPECT_EQ(c.value("screened", true), scope == "all" || topk) << c.dump();
        if (scope == "family" && topk) {
          EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
        }
      }
      EXPECT_DOUBLE_EQ(screened.at(r["current"]["plan"].get<std::string>()), own);
      for (const auto& e : r["explored"]) {
        ++explored;
        const auto plan = e["plan"].get<std::string>();
        const double v = screened.at(plan);
        if (change < 0)
          EXPECT_LT(v, own * (1 - trainer::kFollowGainMargin)) << e.dump();
        else
          EXPECT_GT(v, own * (1 + trainer::kFollowGainMargin)) << e.dump();
        if (plan.rfind("topk{", 0) != 0) ++otherFamilies[scope];
      }
    }
    EXPECT_GE(gainDecisions, 1) << scope << ": " << decisions;
    // The step-5 decision, 5 steps into the run: TopK 1.1%'s residual has
    // not built up, and its replays read the higher vNMSE.
    EXPECT_GE(floored, 1) << scope << ": " << decisions;
    EXPECT_GE(explored, 1) << scope << ": " << decisions;
  }
  EXPECT_EQ(otherFamilies["family"], 0);
  EXPECT_GE(otherFamilies["all"], 1);
}
