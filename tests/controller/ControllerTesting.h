// Shared helpers of the controller's training tests (ControllerRestoreTest,
// ControllerResumeTest, ControllerScreeningTest, ControllerDecisionTest and
// ControllerNetworkTest): the ControllerTrainTest fixture, which trains a
// small MLP config on two Gloo thread ranks, the run logs read back as JSON
// lines, and the check that every rank trained the same plan at every step,
// the steps that exploration or the provisional rewind undid included.
#pragma once

#include "tests/testing/ThreadGroup.h"
#include "tests/trainer/TrainerTesting.h"
#include "controller/ControllerState.h"
#include "trainer/Trainer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gradzip::testing {

// The data set every training test here reads; the fixture skips without it.
inline constexpr char kFmnist[] = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

// The JSON lines of a run log (decisions.jsonl, tta.jsonl, rankR/plans.jsonl).
inline std::vector<nlohmann::json> jsonLines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The MLP config (mlpConfig) under `compress` for `steps` steps, evaluated every
// 10, its collectives timing out after 30 s.
inline trainer::TrainConfig config(const std::string& outDir, const std::string& compress, int64_t steps,
                                   const std::string& optim = "{name: sgd, lr: 0.05, momentum: 0.9}") {
  return gradzip::testing::mlpConfig(outDir, compress,
                                     "train: {max_steps: " + std::to_string(steps) +
                                         ", eval_every: 10, eval_batches: 2}\ncomm: {timeout_s: 30}\n",
                                     optim);
}

// One step a rank trained: its step number, the plan its large buckets ran,
// and what undid it ("" for the steps that stay).
struct TrainedStep {
  int64_t step;
  std::string plan, undoneBy;
  bool operator==(const TrainedStep&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const TrainedStep& t) {
  return os << "step " << t.step << " " << t.plan << (t.undoneBy.empty() ? "" : " undone by " + t.undoneBy);
}

// The plan in force after each step 0 ... last of the kept path, from
// rankDir/plans.jsonl (controller/Controller.h): a record at step s sets it for
// the steps after s, in file order (a rewind's record comes after records of
// later steps and overrides them).
inline std::vector<std::string> keptPlans(const std::string& rankDir, int64_t last) {
  std::vector<std::string> plan(size_t(last + 2));
  for (const auto& r : jsonLines(rankDir + "/plans.jsonl"))
    for (int64_t t = r["step"].get<int64_t>() + 1; t <= last + 1; ++t) plan[size_t(t)] = r["plan"];
  return plan;
}

// Every step one rank trained up to step `last`, in the order it trained
// them: the kept path (keptPlans) and, between the kept steps s and s + 1,
// the undone steps rankDir/undone.jsonl records after s.
inline std::vector<TrainedStep> trainedSteps(const std::string& rankDir, int64_t last) {
  const auto kept = keptPlans(rankDir, last);
  std::multimap<int64_t, nlohmann::json> undone;  // by step, in file order
  for (const auto& r : jsonLines(rankDir + "/undone.jsonl")) undone.emplace(r["step"].get<int64_t>(), r);
  std::vector<TrainedStep> out;
  for (int64_t s = 0; s <= last; ++s) {
    if (s > 0) out.push_back({s, kept[size_t(s)], ""});
    const auto [from, to] = undone.equal_range(s);
    for (auto it = from; it != to; ++it)
      for (int64_t i = 1; i <= it->second["steps"].get<int64_t>(); ++i)
        out.push_back({s + i, it->second["plan"], it->second["by"]});
  }
  return out;
}

// Every rank trained the same plan at every step, the undone steps included
// (trainedSteps of each rank's record, compared step by step), and rank 0's
// record agrees with the run's other logs: its undone steps are those of the
// decision log (each explored candidate after its decision's step, for the
// steps it ran: its timed ones and the first; the provisional rewind's), and
// the kept path's plan after each TTA row's step is among the row's plans.
// Returns rank 0's undone.jsonl records.
inline std::vector<nlohmann::json> expectTheSameStepsOnEveryRank(const std::string& runDir, int64_t last) {
  const auto t0 = trainedSteps(runDir + "/rank0", last), t1 = trainedSteps(runDir + "/rank1", last);
  EXPECT_EQ(t0.size(), t1.size());
  for (size_t i = 0; i < std::min(t0.size(), t1.size()); ++i) EXPECT_EQ(t0[i], t1[i]) << "trained step " << i;
  for (const auto& t : t0) EXPECT_FALSE(t.plan.empty()) << t;  // every step has a plan on record
  const auto undone = jsonLines(runDir + "/rank0/undone.jsonl");
  std::vector<nlohmann::json> logged;
  for (const auto& r : jsonLines(runDir + "/decisions.jsonl")) {
    if (r["event"] == "provisional" && r.contains("rewound"))
      logged.push_back({{"step", r["rewound"]["to_step"]}, {"plan", r["measured_on"]}, {"steps", r["rewound"]["steps"]},
                        {"by", "provisional_rewind"}});
    if (r["event"] != "decision") continue;
    for (const auto& e : r["explored"]) {
      EXPECT_TRUE(e["ok"].get<bool>()) << e.dump();
      logged.push_back({{"step", r["step"]}, {"plan", e["plan"]}, {"steps", e["steps"].get<int64_t>() + 1},
                        {"by", "exploration"}});
    }
  }
  EXPECT_EQ(undone, logged);
  const auto kept = keptPlans(runDir + "/rank0", last);
  for (const auto& row : jsonLines(runDir + "/tta.jsonl")) {
    const auto step = row["step"].get<int64_t>();
    const std::string plan = kept.at(size_t(step + 1));
    std::set<std::string> inUse;  // the row's plans, ';'-separated (trainer/TrainerEvaluation.cpp planSummary)
    std::istringstream keys(row["plan"].get<std::string>());
    for (std::string key; std::getline(keys, key, ';');) inUse.insert(key);
    EXPECT_TRUE(inUse.count(plan)) << "after step " << step << ": the TTA row has " << row["plan"]
                                   << ", rank 0's record " << plan;
  }
  return undone;
}

}  // namespace gradzip::testing

// The fixture of every TEST_F(ControllerTrainTest, ...): trains small configs
// for real on two Gloo thread ranks; skips without Fashion-MNIST.
class ControllerTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(gradzip::testing::kFmnist))
      GTEST_SKIP() << "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)";
  }
  // Trains `cfg` on two thread ranks over Gloo (resuming from its checkpoints).
  static void train(const gradzip::trainer::TrainConfig& cfg, bool resume = false) {
    gradzip::testing::runRanks(
        2, [&](gradzip::comm::Communicator& c) { gradzip::trainer::Trainer(cfg, c).run(resume); }, std::chrono::seconds(60));
  }
  // 40 steps under `compress` uninterrupted (dir/full) and killed before its
  // step-40 checkpoint (dir/part: that checkpoint deleted on both ranks, as
  // if the kill had come before it was written), then resumed from step 30.
  std::pair<gradzip::trainer::TrainConfig, gradzip::trainer::TrainConfig> uninterruptedAndResumedAt30(const std::string& compress) {
    auto full = gradzip::testing::config(dir.path() + "/full", compress, 40);
    train(full);
    auto part = gradzip::testing::config(dir.path() + "/part", compress, 40);
    train(part);
    for (int r = 0; r < 2; ++r)
      for (const char* f : {"/checkpoint.pt", "/checkpoint.pt.sum"})
        EXPECT_TRUE(std::filesystem::remove(part.runDir() + "/rank" + std::to_string(r) + f));
    train(part, true);
    return {full, part};
  }
  // Rank 0's newest controller state (controller/ControllerState.h).
  static gradzip::trainer::ControllerState controllerState(const std::string& runDir) {
    torch::serialize::InputArchive ar;
    ar.load_from(runDir + "/rank0/checkpoint.pt");
    return gradzip::trainer::ControllerState::load(ar);
  }
  gradzip::testing::TempDir dir;
};
