// Tests of experiments/CompareSummary.h on hand-written TTA logs, against
// closed forms: per-step means weighted by the steps each row covers, the
// comm-free time (training seconds minus Σ steps x (exposed + encode +
// decode)), bits per coordinate (8 x bytes / (parameters x steps)), repeats'
// mean and range, utility over FP16 at the highest target every run reached,
// unknown (null) communication figures for DDP peers, and vNMSE as the mean
// over rows weighted by the steps each measured (every 10th, or every step
// with the controller's decisions.jsonl), pooled over repeats; and the noise
// rule: a speedup whose arms first reached the target in overlapping evaluation
// windows, or whose step times agree within their spread (one run), is marked.
#include "experiments/CompareSummary.h"
#include "tests/testing/ThreadGroup.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

namespace fs = std::filesystem;
using namespace gradzip::experiments;

namespace {

struct Row {
  int64_t step;
  double seconds, metric, stepTime, exposed, encode, decode;
  int64_t bytes;
  std::optional<double> vnmse = std::nullopt;  // written as null when absent, as trainer/TtaLog.cpp does
};

// Writes dir/name/tta.jsonl with `plan` and the rows; returns the run dir.
std::string writeRun(const std::string& dir, const std::string& name, const std::string& plan,
                     const std::vector<Row>& rows) {
  const std::string run = dir + "/" + name;
  fs::create_directories(run);
  std::ofstream out(run + "/tta.jsonl");
  for (const auto& r : rows) {
    nlohmann::json j = {{"step", r.step},
                        {"train_seconds", r.seconds},
                        {"metrics", {{"accuracy", r.metric}}},
                        {"plan", plan},
                        {"bytes", r.bytes},
                        {"breakdown",
                         {{"step", r.stepTime}, {"compute", r.stepTime / 2}, {"exposed", r.exposed},
                          {"encode", r.encode}, {"decode", r.decode}, {"data_wait", 0.0}, {"optimizer", 0.0}}}};
    if (r.vnmse) j["vnmse"] = *r.vnmse;
    else j["vnmse"] = nullptr;
    out << j.dump() << "\n";
  }
  return run;
}

const std::vector<double> kTargets = {0.5, 0.7, 0.9};

// 10 steps at 0.1 s (0.035 s of it communication), then 20 at 0.2 s (0.08 s).
std::vector<Row> baseRows(double scale) {
  return {{10, 1.2 * scale, 0.5, 0.1 * scale, 0.02 * scale, 0.01 * scale, 0.005 * scale, 1'000'000},
          {30, 5.5 * scale, 0.8, 0.2 * scale, 0.05 * scale, 0.02 * scale, 0.01 * scale, 3'000'000}};
}

}  // namespace

TEST(CompareSummary, ReadRunWeighsRowsBySteps) {
  gradzip::testing::TempDir dir;
  const RunStats r = readRun(writeRun(dir.path(), "a", "thc{bits: 4}@ps", baseRows(1.0)), kTargets);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.plan, "thc{bits: 4}@ps");
  EXPECT_EQ(r.steps, 30);
  EXPECT_EQ(r.bytes, 3'000'000);
  EXPECT_NEAR(r.step, (10 * 0.1 + 20 * 0.2) / 30, 1e-12);
  EXPECT_NEAR(r.exposed, (10 * 0.02 + 20 * 0.05) / 30, 1e-12);
  ASSERT_TRUE(r.timeToTarget[0] && r.timeToTarget[1]);
  EXPECT_DOUBLE_EQ(*r.timeToTarget[0], 1.2);
  EXPECT_DOUBLE_EQ(*r.timeToTarget[1], 5.5);
  EXPECT_FALSE(r.timeToTarget[2]);
  EXPECT_NEAR(*r.commFreeToTarget[0], 1.2 - 10 * 0.035, 1e-12);
  EXPECT_NEAR(*r.commFreeToTarget[1], 5.5 - 10 * 0.035 - 20 * 0.08, 1e-12);
  EXPECT_NEAR(r.commFreeSeconds, 5.5 - 10 * 0.035 - 20 * 0.08, 1e-12);
  EXPECT_FALSE(r.ddp);
  // Crossed 0.5 at the first evaluation, 0.7 at the second.
  EXPECT_DOUBLE_EQ(*r.targetWindowStart[0], 0.0);
  EXPECT_DOUBLE_EQ(*r.targetWindowStart[1], 1.2);
  EXPECT_FALSE(r.targetWindowStart[2]);
  // Rows of 0.1 s (10 steps) and 0.2 s (20 steps): sd = 0.1 x sqrt(1/3 x 2/3).
  EXPECT_NEAR(r.stepSd, 0.1 * std::sqrt(2.0) / 3, 1e-12);
  EXPECT_FALSE(readRun(dir.path() + "/missing", kTargets).ok);
}

TEST(CompareSummary, RepeatsUtilityBitsAndDdpUnknowns) {
  gradzip::testing::TempDir dir;
  SummaryInput in;
  in.title = "t";
  in.targets = kTargets;
  // fp16 takes twice as long as the arm; its second repeat three times.
  in.arms.push_back({"fp16", "fp16@engine",
                     {readRun(writeRun(dir.path(), "fp16", "fp16@engine", baseRows(2.0)), kTargets),
                      readRun(writeRun(dir.path(), "fp16.r1", "fp16@engine", baseRows(3.0)), kTargets)},
                     100'000});
  in.arms.push_back({"fp32", "fp32@engine", {readRun(dir.path() + "/none", kTargets)}, 100'000});
  in.arms.push_back({"arm", "x@ps", {readRun(writeRun(dir.path(), "arm", "", baseRows(1.0)), kTargets)}, 100'000});
  in.arms.push_back(
      {"ddp", "ddp-fp16", {readRun(writeRun(dir.path(), "ddp", "ddp-fp16", baseRows(1.0)), kTargets)}, 100'000});
  const auto js = summaryJson(in);
  ASSERT_EQ(js.size(), 4u);
  const auto& fp16 = js[0];
  EXPECT_EQ(fp16["repeats"], 2);
  EXPECT_DOUBLE_EQ(fp16["time_to_target"][1].get<double>(), (5.5 * 2 + 5.5 * 3) / 2);
  EXPECT_DOUBLE_EQ(fp16["time_to_target_min"][1].get<double>(), 11.0);
  EXPECT_DOUBLE_EQ(fp16["time_to_target_max"][1].get<double>(), 16.5);
  EXPECT_EQ(fp16["never_reached"], nlohmann::json::array({0.9}));
  EXPECT_EQ(js[1]["runs_ok"], 0);  // fp32 not run: no utility over it
  const auto& arm = js[2];
  EXPECT_EQ(arm["plan"], "x@ps");  // the rows carry no plan: the configured one
  EXPECT_DOUBLE_EQ(arm["utility_vs_fp16"].get<double>(), 13.75 / 5.5);  // at 0.7, the highest both reached
  EXPECT_TRUE(arm["speedup_vs_fp32"].is_null());
  EXPECT_DOUBLE_EQ(arm["bits_per_coordinate"].get<double>(), 8.0 * 3'000'000 / (100'000.0 * 30));
  EXPECT_NEAR(arm["tta_over_comm_free"].get<double>(), 5.5 / (5.5 - 0.35 - 1.6), 1e-12);
  EXPECT_DOUBLE_EQ(arm["tta_over_comm_free_target"].get<double>(), 0.7);
  EXPECT_NEAR(arm["encode_decode_share"].get<double>(), (10 * 0.015 + 20 * 0.03) / (10 * 0.1 + 20 * 0.2), 1e-12);
  const auto& ddp = js[3];
  for (const char* k : {"comm_free_seconds", "exposed_share", "encode_decode_share", "tta_over_comm_free"})
    EXPECT_TRUE(ddp[k].is_null()) << k;
  EXPECT_DOUBLE_EQ(ddp["utility_vs_fp16"].get<double>(), 13.75 / 5.5);

  const std::string md = summaryMarkdown(in);
  EXPECT_NE(md.find("| fp16 | `fp16@engine` | 2 | 3.0 s [2.4–3.6] | 13.8 s [11.0–16.5] | never |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| fp32 | (not run) |"), std::string::npos) << md;
  // The arm crossed 0.7 in (1.2, 5.5] s, fp16's runs in (2.4, 11] and (3.6, 16.5]: the windows overlap.
  EXPECT_NE(md.find("| arm | `x@ps` | 1 | 1.2 s | 5.5 s | never | 0.8000 | 2.50x† | n/a | 0.9 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("- arm vs fp16 (2.50x at 0.7): they first reached it in overlapping evaluation "
                    "windows (1.2–5.5 s and 2.4–16.5 s)"),
            std::string::npos)
      << md;
  EXPECT_EQ(arm["utility_vs_fp16_noise"], "eval_interval");
  EXPECT_TRUE(arm["speedup_vs_fp32_noise"].is_null());
  EXPECT_EQ(fp16["utility_vs_fp16_noise"], "none");  // itself
  EXPECT_NE(md.find(" 1.55 (@0.7) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 8.00 | n/a |"), std::string::npos) << md;
}

TEST(CompareSummary, VnmseIsTheMeasuredStepWeightedMeanOverRows) {
  gradzip::testing::TempDir dir;
  // Rows at steps 10, 30, 45 cover steps [0, 10), [10, 30), [30, 45); the
  // trainer measures steps 0 | 10, 20 | 30, 40: 1, 2, 2 of them. The middle
  // row carries no vNMSE (null) and does not count.
  const std::vector<Row> rows = {{10, 1.0, 0.5, 0.1, 0, 0, 0, 100, 0.2},
                                 {30, 3.0, 0.6, 0.1, 0, 0, 0, 300, std::nullopt},
                                 {45, 4.5, 0.7, 0.1, 0, 0, 0, 450, 0.5}};
  const RunStats fixed = readRun(writeRun(dir.path(), "fixed", "thc{bits: 4}@ps", rows), kTargets);
  EXPECT_EQ(fixed.vnmseSteps, 3);
  EXPECT_DOUBLE_EQ(fixed.vnmse, (0.2 * 1 + 0.5 * 2) / 3);
  // A controller run (decisions.jsonl) measures every step: weights 10 and 15.
  const std::string ctl = writeRun(dir.path(), "ctl", "fp16@engine", rows);
  std::ofstream(ctl + "/decisions.jsonl") << "{}\n";
  const RunStats auto_ = readRun(ctl, kTargets);
  EXPECT_EQ(auto_.vnmseSteps, 25);
  EXPECT_DOUBLE_EQ(auto_.vnmse, (0.2 * 10 + 0.5 * 15) / 25);
  // Repeats pool their rows: a second run measuring steps 0 and 10 at 0.1.
  const RunStats second =
      readRun(writeRun(dir.path(), "fixed.r1", "thc{bits: 4}@ps", {{20, 2.0, 0.5, 0.1, 0, 0, 0, 200, 0.1}}), kTargets);
  EXPECT_EQ(second.vnmseSteps, 2);
  std::vector<Row> peerRows = rows;
  for (auto& r : peerRows) r.vnmse.reset();  // a DDP peer writes null
  const RunStats ddp = readRun(writeRun(dir.path(), "ddp", "ddp-fp16", peerRows), kTargets);
  EXPECT_EQ(ddp.vnmseSteps, 0);
  EXPECT_TRUE(std::isnan(ddp.vnmse));

  SummaryInput in{"t", kTargets, {}};
  in.arms.push_back({"fp16", "fp16@engine", {readRun(writeRun(dir.path(), "fp16", "fp16@engine", baseRows(1.0)), kTargets)}, 100});
  in.arms.push_back({"thc4", "thc{bits: 4}@ps", {fixed, second}, 100});
  in.arms.push_back({"ddp", "ddp-fp16", {ddp}, 100});
  const auto js = summaryJson(in);
  EXPECT_TRUE(js[0]["vnmse"].is_null());  // every row null
  EXPECT_DOUBLE_EQ(js[1]["vnmse"].get<double>(), (0.2 * 1 + 0.5 * 2 + 0.1 * 2) / 5);  // 0.28
  EXPECT_DOUBLE_EQ(js[1]["runs"][0]["vnmse"].get<double>(), 0.4);
  EXPECT_TRUE(js[2]["vnmse"].is_null());
  const std::string md = summaryMarkdown(in);
  EXPECT_NE(md.find("| 0.28 | 0.0 |"), std::string::npos) << md;  // vNMSE, then MB sent (450 B)
}

namespace {

// A run that first reached each target t in (windows[t].first, windows[t].second]
// training seconds ({-1, -1}: never), with mean step time `step` ± `sd`.
RunStats crossed(std::vector<std::pair<double, double>> windows, double step, double sd, const std::string& plan) {
  RunStats r;
  r.ok = true;
  r.plan = plan;
  for (const auto& [start, end] : windows) {
    const bool reached = end >= 0;
    r.timeToTarget.push_back(reached ? std::optional<double>(end) : std::nullopt);
    r.targetWindowStart.push_back(reached ? std::optional<double>(start) : std::nullopt);
    r.commFreeToTarget.push_back(std::nullopt);
  }
  r.step = step;
  r.stepSd = sd;
  r.steps = 400;
  r.bytes = 400'000;
  r.finalMetric = 0.86;
  r.trainSeconds = 60;
  return r;
}

ArmStats armOf(const std::string& name, std::vector<RunStats> runs) {
  const std::string plan = runs.front().plan;
  return {name, plan, std::move(runs), 1000};
}

}  // namespace

TEST(CompareSummary, NoiseRuleMarksSpeedupsTheRunsCannotResolve) {
  // Evaluations every 50 steps. fp16 steps 149 ± 4 ms and first reaches the
  // target at its 8th evaluation: in (7, 8] x 50 x 0.149 s.
  const ArmStats fp16 = armOf("fp16", {crossed({{52.15, 59.6}}, 0.149, 0.004, "fp16@engine")});
  // THC at 151 ± 4 ms gets there one evaluation sooner: the windows overlap.
  const ArmStats thcNext = armOf("thc4", {crossed({{45.3, 52.85}}, 0.151, 0.004, "thc")});
  auto s = speedupOver(thcNext, fp16, 1);
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->ratio, 59.6 / 52.85);
  EXPECT_EQ(s->target, 0u);
  EXPECT_EQ(s->noise, Noise::kEvalInterval);
  // Three evaluations sooner: windows apart, but the step times agree within
  // their spread (2 ms <= 4 + 4), and each arm ran once.
  const ArmStats thcEarly = armOf("thc4", {crossed({{30.2, 37.75}}, 0.151, 0.004, "thc")});
  s = speedupOver(thcEarly, fp16, 1);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->noise, Noise::kStepTime);
  // The same gap in two repeats of each arm is no longer one seed's path.
  const ArmStats fp16Twice = armOf("fp16", {crossed({{52.15, 59.6}}, 0.149, 0.004, "fp16@engine"),
                                            crossed({{44.7, 52.15}}, 0.149, 0.004, "fp16@engine")});
  const ArmStats thcTwice =
      armOf("thc4", {crossed({{30.2, 37.75}}, 0.151, 0.004, "thc"), crossed({{22.65, 30.2}}, 0.151, 0.004, "thc")});
  s = speedupOver(thcTwice, fp16Twice, 1);
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->ratio, (59.6 + 52.15) / (37.75 + 30.2));
  EXPECT_EQ(s->noise, Noise::kNone);
  // ...unless a repeat's window reaches into the other arm's: pooled windows
  // [30.2, 45.0] and [44.7, 59.6] overlap.
  const ArmStats thcSpread =
      armOf("thc4", {crossed({{30.2, 37.75}}, 0.151, 0.004, "thc"), crossed({{37.75, 45.0}}, 0.151, 0.004, "thc")});
  EXPECT_EQ(speedupOver(thcSpread, fp16Twice, 1)->noise, Noise::kEvalInterval);
  // A real speedup: windows apart, 195 ms against 384 ms.
  const ArmStats topk = armOf("topkc2", {crossed({{27.3, 31.2}}, 0.195, 0.02, "topkc")});
  const ArmStats fp16Slow = armOf("fp16", {crossed({{57.6, 76.8}}, 0.384, 0.01, "fp16@engine")});
  s = speedupOver(topk, fp16Slow, 1);
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->ratio, 76.8 / 31.2);
  EXPECT_EQ(s->noise, Noise::kNone);
  EXPECT_EQ(speedupOver(fp16, fp16, 1)->noise, Noise::kNone);  // an arm against itself
}

TEST(CompareSummary, NoiseRuleEdges) {
  // Binary-exact values. Windows that only touch, (30, 40] and (40, 50], are apart.
  const ArmStats base = armOf("fp16", {crossed({{40, 50}, {-1, -1}}, 0.5, 0.125, "fp16@engine")});
  auto at = [&](double end, double step) {
    return speedupOver(armOf("a", {crossed({{30, end}, {60, 70}}, step, 0.125, "a")}), base, 2);
  };
  // Step times 0.875 and 0.5: 0.375 > 0.125 + 0.125.
  EXPECT_EQ(at(40, 0.875)->noise, Noise::kNone);
  EXPECT_EQ(at(40.5, 0.875)->noise, Noise::kEvalInterval);
  // 0.75 and 0.5: 0.25 = 0.125 + 0.125, within the spread.
  EXPECT_EQ(at(40, 0.75)->noise, Noise::kStepTime);
  // Only the first target was reached by both: the speedup is at index 0.
  EXPECT_EQ(at(40, 0.875)->target, 0u);
  EXPECT_DOUBLE_EQ(at(40, 0.875)->ratio, 50.0 / 40.0);
}

TEST(CompareSummary, BriefTableMarksNoiseAndKeepsTheFewColumns) {
  SummaryInput in{"quickstart (2 ranks, network 20 Mbit/s)", {0.85}, {}};
  in.arms.push_back(armOf("fp32", {crossed({{96.0, 120.0}}, 0.6, 0.02, "fp32@engine")}));
  in.arms.push_back(armOf("fp16", {crossed({{52.15, 59.6}}, 0.149, 0.004, "fp16@engine")}));
  in.arms.push_back(armOf("thc4", {crossed({{45.3, 52.85}}, 0.151, 0.004, "thc{bits: 4}@ps")}));
  in.arms.push_back(armOf("topkc2", {crossed({{21.0, 24.0}}, 0.12, 0.004, "topkc{bits: 2}@engine")}));
  const std::string brief = summaryBrief(in);
  EXPECT_NE(brief.find("| arm | plan | TTA 0.85 | vs FP16 | vs FP32 | step ms | bits/coord | final metric |\n"
                       "|---|---|---|---|---|---|---|---|\n"),
            std::string::npos)
      << brief;
  // bits/coord = 8 x 400,000 / (1000 x 400) = 8.
  EXPECT_NE(brief.find("| thc4 | `thc{bits: 4}@ps` | 52.9 s | 1.13x† | 2.27x | 151 ±4 | 8.00 | 0.8600 |"),
            std::string::npos)
      << brief;
  EXPECT_NE(brief.find("| topkc2 | `topkc{bits: 2}@engine` | 24.0 s | 2.48x | 5.00x | 120 ±4 |"), std::string::npos)
      << brief;
  EXPECT_NE(brief.find("| fp16 | `fp16@engine` | 59.6 s | 1.00x | 2.01x | 149 ±4 |"), std::string::npos) << brief;
  EXPECT_NE(brief.find("- thc4 vs fp16 (1.13x at 0.85): they first reached it in overlapping evaluation windows"),
            std::string::npos)
      << brief;
  EXPECT_EQ(brief.find("topkc2 vs"), std::string::npos) << brief;
  EXPECT_EQ(brief.find("comm-free"), std::string::npos) << brief;
  const std::string md = summaryMarkdown(in);
  EXPECT_NE(md.find("comm-free"), std::string::npos);
  EXPECT_NE(md.find("- thc4 vs fp16 (1.13x at 0.85): they first reached it in overlapping evaluation windows"),
            std::string::npos)
      << md;

  in.arms.erase(in.arms.begin() + 2);  // without thc4, nothing is within noise
  EXPECT_NE(summaryBrief(in).find("No speedup here is within noise"), std::string::npos);
  EXPECT_EQ(summaryBrief(in).find("†"), std::string::npos);
  in.arms.erase(in.arms.begin(), in.arms.begin() + 1);
  in.arms.erase(in.arms.begin() + 1, in.arms.end());  // fp16 alone: no speedup to judge
  EXPECT_EQ(summaryBrief(in).find("within noise"), std::string::npos) << summaryBrief(in);
}
