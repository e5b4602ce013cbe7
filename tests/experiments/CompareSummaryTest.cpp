// Tests of experiments/CompareSummary.h on hand-written TTA logs, against
// closed forms: per-step means weighted by the steps each row covers, the
// comm-free time (training seconds minus Σ steps x (exposed + encode +
// decode)), bits per coordinate (8 x bytes / (parameters x steps)), repeats'
// mean and range, utility over FP16 at the highest target every run reached,
// unknown (null) communication figures for DDP peers, and vNMSE as the mean
// over rows weighted by the steps each measured (every 10th, or every step
// with the controller's decisions.jsonl), pooled over repeats.
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
  EXPECT_NE(md.find("| arm | `x@ps` | 1 | 1.2 s | 5.5 s | never | 0.8000 | 2.50x | n/a | 0.9 |"), std::string::npos)
      << md;
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
