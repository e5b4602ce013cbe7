// Tests of the controller in emulated networks (root only: `gradzip launch
// --net` puts each rank of the built binary in its own network namespace
// under a rate schedule): when the link slows down it moves to a plan with
// fewer bits than fp16, and when the link recovers, bandwidth soundings
// (controller/BandwidthSounding.h) see it and it moves back to a denser plan;
// every rank runs the same plan at every step throughout.
#include "tests/controller/ControllerTesting.h"
#include "tests/testing/Process.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace gradzip;
using gradzip::testing::expectTheSameStepsOnEveryRank;
using gradzip::testing::jsonLines;

namespace {

// The step at which the launcher applied `rate` ("10 Mbit/s", "unshaped") of
// an epoch schedule: it logs the epoch (from the progress file rank 0 writes
// every step) read just before it changed the shaping, so the change came at
// that step or later. -1 if the log has no such line.
int64_t scheduleStep(const std::string& launchLog, const std::string& rate, double stepsPerEpoch) {
  const auto at = launchLog.find(" rate " + rate);
  if (at == std::string::npos) return -1;
  const auto e = launchLog.rfind("epoch ", at);
  if (e == std::string::npos) return -1;
  return int64_t(std::stod(launchLog.substr(e + 6, at - e - 6)) * stepsPerEpoch);
}

}  // namespace

// Runs of the real CLI with each rank in its own network namespace (root, and
// the built binary).
class ControllerNetTest : public ControllerTrainTest {
 protected:
  void SetUp() override {
    ControllerTrainTest::SetUp();
    if (IsSkipped()) return;
    if (geteuid() != 0) GTEST_SKIP() << "network emulation needs root";
    const std::string bin = gradzip::testing::gradzipBinary();
    if (bin.empty() || !fs::exists(bin)) GTEST_SKIP() << "GRADZIP_BINARY not set or not built";
  }
  // `gradzip launch -n 2 --net NET` of the hidden-64 MLP (2 x 32 images a
  // step, 937 steps an epoch) under `compress` for `train` (the YAML flow
  // map's inside), as run "s" below dir; the launcher's output.
  gradzip::testing::Output launchEmulated(const std::string& net, const std::string& train, const std::string& compress) {
    const std::string cfg = dir.path() + "/emulated.yaml";
    std::ofstream(cfg) << "run: {name: s, out_dir: " << dir.path() << ", seed: 2, threads: 1}\n"
                       << "model: {name: mlp, mlp: {hidden: [64]}}\n"
                       << "data: {dataset: fashion_mnist, batch_size: 32}\n"
                       << "optim: {name: sgd, lr: 0.05, momentum: 0.9}\n"
                       << "schedule: {name: constant}\n"
                       << "train: {" << train << "}\n"
                       << "compress: {name: auto, " << compress << "}\n";
    return gradzip::testing::runCommand(gradzip::testing::gradzipBinary() + " launch -n 2 --net " + net + " " + cfg,
                                        std::chrono::seconds(300));
  }
};

TEST_F(ControllerNetTest, MovesToACheaperPlanWhenTheLinkSlowsDown) {
  // Two ranks in network namespaces; the link is unshaped for the first 0.03
  // epoch (~28 steps of 2 x 32 images, plus the progress file's lag) and
  // 10 Mbit/s after that (a rate schedule in epochs). At 10 Mbit/s the fp16
  // gradient (100 KB) takes ~80 ms a step, so a plan with fewer bits than
  // fp16 wins by an order of magnitude. On the fast link the controller
  // usually keeps fp16 (time_weight 0.3 favours accuracy), but a loaded host
  // can make the namespace link look slow enough (80 Mbit/s seen) for TopK
  // 10% there, so the test states what holds either way. Stated bound: a
  // decision moves to (or keeps) a plan with fewer bits than fp16 within 30
  // steps of the launcher's change (the median of 9 observations flips after
  // 5, the change must persist 5 more steps, checks come every 5 steps, and
  // network_interval = 10 after an earlier decision can add to that); the
  // first decision whose α-β refit sees the slow link (within 3x of 10
  // Mbit/s) runs such a plan; a move is in the plan log; and every rank runs
  // the same plan at every step.
  auto o = launchEmulated("0e:unshaped,0.03e:10", "max_steps: 200, eval_every: 5, eval_batches: 1",
                          "families: [fp32, fp16, topk, topkc], time_weight: 0.3, warmup_steps: 10, check_every: 5,"
                          " min_interval: 20, network_interval: 10, explore: 2, explore_steps: 3,"
                          " probe: {budget_seconds: 1}");
  ASSERT_EQ(o.status, 0) << o.text;
  const std::string run = dir.path() + "/s";
  // Where the launcher changed the link (937 steps of 2 x 32 images make an
  // epoch; it polls the progress file, so the change lands up to ~0.5 s
  // after 0.03 epoch).
  const int64_t applied = scheduleStep(o.text, "10 Mbit/s", 937.0);
  ASSERT_GE(applied, 0) << o.text;
  std::string windows;  // every TTA row's step, plan and mean step, for the messages
  for (const auto& r : jsonLines(run + "/tta.jsonl"))
    windows += fmt::format("{} {} {:.4f}; ", r["step"].get<int64_t>(), r["plan"].get<std::string>(),
                           r["breakdown"]["step"].get<double>());
  // Along the decision log: the plan in force (the start's, then each
  // provisional step's and decision's choice) and the one in force when the
  // launcher changed the link; `moved`, the first decision after the change
  // to run a plan with fewer bits than fp16 and no more than the one in force
  // (a decision while the link was still changing may move there before its
  // refit sees all of the slowdown, and keeping such a plan is then right);
  // and the first decision whose refit sees the slow link.
  std::string inForce, atChange, seen, movedTo, slowChoice;
  std::map<std::string, double> bits;  // wire bits per coordinate, by plan
  int64_t moved = -1, slowStep = -1;
  for (const auto& r : jsonLines(run + "/decisions.jsonl")) {
    if (r["event"] == "start") inForce = r["plan"];
    if (r["event"] == "beta")
      seen += fmt::format("β at step {}: {:.1f} Mbit/s from {}; ", r["step"].get<int64_t>(),
                          8e-6 / r["beta"].get<double>(), r["from"].get<std::string>());
    if (r["event"] != "provisional" && r["event"] != "decision") continue;
    const int64_t step = r["step"].get<int64_t>();
    if (atChange.empty() && step >= applied) atChange = inForce;
    for (const auto& c : r["candidates"])
      if (c["bits"].is_number()) bits[c["plan"]] = c["bits"];
    const std::string chosen = r["chosen"];
    if (r["event"] == "decision") {
      seen += fmt::format("step {} ({}): {} at {:.1f} Mbit/s; ", step, r["trigger"].get<std::string>(), chosen,
                          r["bandwidth_mbit"].get<double>());
      const bool cheaper = bits.at(chosen) < bits.at("fp16@engine") && bits.at(chosen) <= bits.at(inForce);
      if (step >= applied && moved < 0 && cheaper) {
        moved = step;
        movedTo = chosen;
      }
      if (step >= applied && slowStep < 0 && r["bandwidth_mbit"].get<double>() <= 30) {
        slowStep = step;
        slowChoice = chosen;
      }
    }
    inForce = chosen;
  }
  if (atChange.empty()) atChange = inForce;
  ASSERT_GE(moved, 0) << "no decision after step " << applied << " moved to a plan with fewer bits than fp16; "
                      << seen << "\nTTA windows: " << windows;
  EXPECT_LE(moved - applied, 30) << "the link changed at step " << applied << ", the move came at step " << moved
                                 << "; " << seen;
  ASSERT_GE(slowStep, 0) << "no decision saw the slow link; " << seen << "\nTTA windows: " << windows;
  EXPECT_LT(bits.at(slowChoice), bits.at("fp16@engine"))
      << "at step " << slowStep << " the slow link got " << slowChoice << "; " << seen;
  if (movedTo != atChange) {  // a move: the plan log has it
    const auto plans = jsonLines(run + "/rank0/plans.jsonl");
    EXPECT_TRUE(std::any_of(plans.begin(), plans.end(), [&](const nlohmann::json& p) {
      return p["step"].get<int64_t>() == moved && p["plan"].get<std::string>() == movedTo;
    })) << "no record of the move to " << movedTo << " at step " << moved << " in rank0/plans.jsonl";
  }
  std::cout << "link slowed at step " << applied << " (" << atChange << " in force), moved at step " << moved
            << " to " << movedTo << ", first decision to see it at step " << slowStep << ": " << slowChoice << "; "
            << seen << "\nTTA windows: " << windows << "\n";
  expectTheSameStepsOnEveryRank(run, 200);
}

TEST_F(ControllerNetTest, SoundsTheLinkAndMovesBackToADensePlanWhenItRecovers) {
  // The reverse of the test above: 5 Mbit/s for the first 0.08 epoch (~75
  // steps), unshaped after. At 5 Mbit/s the first decision (step 10) moves
  // to TopK 1% or 0.1% (3 KB or 300 B all-gathers a step: within the token
  // bucket's burst, as fast on the slow link as on the fast one), so the
  // plan's own collectives cannot show the link recovering. Bandwidth
  // soundings (64 KB all-reduces every 20 steps, controller/BandwidthSounding.h)
  // can. Stated bound: within 80 steps of the step the launcher logged for
  // the change, a decision whose β came from soundings sees a fast link
  // (> 100 Mbit/s) and moves from the sparse plan to a denser one. (The
  // sounding interval, 20 steps, plus confirmation at the next check and the
  // decision at the check after, 10; the rest is the lag until the change
  // reaches the link and soundings disturbed by the loaded host: 20-40 steps
  // of ~3 ms in our runs. The launcher reads the epoch rank 0 writes every
  // 50 ms and polls as often, so the change lands up to ~0.1 s, ~35 steps,
  // after the step it logs. With 250 ms for both, one CI run under load saw
  // the first sounding to find the fast link 77 steps after the logged step,
  // and the decision 87 steps after it.) explore_steps 5: a candidate is
  // measured by the median of its 4 timed steps of ~3 ms. With 3 (a mean of
  // 2) one CI run's step-115 decision, at 3799 Mbit/s, kept TopK 0.1%: one
  // step the loaded host disturbed made fp16 look more than 2.4x slower,
  // which at time_weight 0.3 outweighs its vNMSE. ef_rate_scale 0.015, the
  // scale time_weight 0.3 was set under: at the default 0.03 the MLP's TopK
  // vNMSE (error feedback's steady state) costs twice as much, and the
  // step-10 choice on the slow link became a coin toss (fp16 in 2 of 4 runs).
  // 5 Mbit/s, not 10: TopK 1%'s ef_rate cost, 0.015 x 0.91/0.09^2 = 1.7 at
  // the vNMSE of 0.91 it screens at, outweighs fp16's relative time excess
  // e at time_weight 0.3 while 0.3 e^2 < 0.7 x 1.7^2, i.e. while fp16's step
  // is under 3.6x TopK's. At 10 Mbit/s (fp16 ~80 ms a step) one run of the
  // project's CI (2026-12-02, the test 14.6 s against 5-10 s here: slower
  // steps on a loaded host, which narrow that ratio) kept fp16 at step 10;
  // at 5 Mbit/s fp16 takes ~165 ms a step.
  auto o = launchEmulated("0e:5,0.08e:unshaped", "max_steps: 300, eval_every: 50, eval_batches: 1",
                          "families: [fp16, topk], ratios: [0.01, 0.001], time_weight: 0.3, ef_rate_scale: 0.015,"
                          " warmup_steps: 10,"
                          " check_every: 5, min_interval: 1000, network_interval: 10, explore: 2, explore_steps: 5,"
                          " sound_every: 20, sound_share: 1, probe: {budget_seconds: 1}");
  ASSERT_EQ(o.status, 0) << o.text;
  const std::string run = dir.path() + "/s";
  const int64_t recovered = scheduleStep(o.text, "unshaped", 937.0);
  ASSERT_GE(recovered, 0) << o.text;

  std::string plan = "fp16@engine", sparse, seen;
  std::map<std::string, double> bits;
  int soundings = 0;
  bool checked = false;
  std::string early;  // the records up to the first decision, in full for a failure's message
  for (const auto& r : jsonLines(run + "/decisions.jsonl")) {
    if (bits.empty()) early += r.dump() + "\n";
    if (r["event"] != "sounding" && r["event"] != "decision") continue;  // start, followup
    const int64_t step = r.at("step").get<int64_t>();
    if (r["event"] == "sounding") {
      ++soundings;
      EXPECT_EQ(r["bytes"].get<int64_t>(), 65536) << r.dump();
      EXPECT_EQ(r["plan"], plan) << r.dump();  // soundings watch the running plan's link
      EXPECT_TRUE(bits.count(plan) && bits.at(plan) < bits.at("fp16@engine")) << "a sounding on a dense plan: " << r.dump();
      seen += fmt::format("sounding {} ({}, x{:.3g}); ", step, r["verdict"].get<std::string>(),
                          r["change"].get<double>());
      continue;
    }
    for (const auto& c : r["candidates"])
      if (c["bits"].is_number()) bits[c["plan"]] = c["bits"];
    seen += fmt::format("decision {} ({}): {} at {:.1f} Mbit/s", step, r["trigger"].get<std::string>(),
                        r["chosen"].get<std::string>(), r["bandwidth_mbit"].get<double>());
    // What the knee weighed: the running plan and the explored ones, measured.
    const auto point = [](const nlohmann::json& c) {
      return fmt::format(" {} {:.2f} ms vNMSE {}", c.value("plan", std::string()),
                         1e3 * c.value("measured_step", NAN), c.contains("vnmse") ? c["vnmse"].dump() : "-");
    };
    if (r.contains("current")) seen += " [current" + point(r["current"]);
    for (const auto& c : r.value("explored", nlohmann::json::array())) seen += ";" + point(c);
    seen += r.contains("current") ? "]; " : "; ";
    const std::string before = plan;
    plan = r["chosen"];
    if (step < recovered || r["bandwidth_mbit"].get<double>() < 100) {
      if (bits.at(plan) < bits.at("fp16@engine")) sparse = plan;
      continue;
    }
    // The first decision that saw the fast link.
    EXPECT_LE(step - recovered, 80) << seen;
    EXPECT_NE(r.value("refit", std::string()).find("soundings"), std::string::npos) << seen;
    EXPECT_LT(bits.at(before), bits.at("fp16@engine")) << seen;
    EXPECT_GT(bits.at(plan), bits.at(before)) << seen;
    checked = true;
    break;
  }
  std::cout << "link recovered at step >= " << recovered << "; " << seen << "\n";
  ASSERT_FALSE(sparse.empty()) << "the slow link did not lead to a sparse plan; " << seen << "\n" << early;
  EXPECT_GE(soundings, 2) << seen;
  EXPECT_TRUE(checked) << "no denser plan after the link recovered; " << seen;
  EXPECT_EQ(jsonLines(run + "/rank0/plans.jsonl"), jsonLines(run + "/rank1/plans.jsonl"));
}
