// Tests of resuming a controlled run from its checkpoint
// (controller/ControllerState.h, on two Gloo thread ranks): it goes on with
// the plan it checkpointed, bit for bit like the uninterrupted run; it logs
// every step and noise measurement once, nothing of the killed run's undone
// steps; and its count of steps on the plan goes on from the checkpoint,
// pinned or not.
#include "tests/controller/ControllerTesting.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <string>
#include <vector>

using namespace gradzip;
using gradzip::testing::config;
using gradzip::testing::jsonLines;

TEST_F(ControllerTrainTest, AResumedRunGoesOnWithThePlanItCheckpointed) {
  // A sparse start whose only candidate is the sparse plan itself: the
  // provisional step keeps it without moving (no rewind), and no decision
  // comes before warmup_steps (100). A run checkpointed at step 20 and
  // resumed to 30 must go on with TopK 0.1% and its residual, bit for bit
  // like the uninterrupted run, not fall back to `initial` (fp16). The
  // checkpoint names the plan it ran.
  const std::string sparsePlan = "topk{ratio: 0.001}@allgather";
  const std::string compress =
      "{name: auto, families: [topk], ratios: [0.001], collectives: [allgather], warmup_steps: 100,"
      " sparse_start_above: 0, probe: {budget_seconds: 0.5}}";
  auto full = config(dir.path() + "/full", compress, 30);
  train(full);
  auto part = config(dir.path() + "/part", compress, 20);
  train(part);
  torch::serialize::InputArchive ar;
  ar.load_from(part.runDir() + "/rank0/checkpoint.pt");
  c10::IValue key;
  EXPECT_TRUE(ar.try_read("controller/plan", key) && key.isString() && key.toStringRef() == sparsePlan);
  auto resumed = config(dir.path() + "/part", compress, 30);
  train(resumed, true);
  const auto a = jsonLines(full.runDir() + "/tta.jsonl"), b = jsonLines(resumed.runDir() + "/tta.jsonl");
  ASSERT_EQ(a.size(), 3u);
  gradzip::testing::expectSamePath(a, b, sparsePlan);
  for (const auto& r : jsonLines(resumed.runDir() + "/rank0/plans.jsonl"))
    EXPECT_EQ(r["plan"], sparsePlan) << r.dump();
  // Each plan change once, as the uninterrupted run logged it (the resumed
  // run's start and checkpointed plan add no record of their own).
  for (int r = 0; r < 2; ++r) {
    const std::string log = fmt::format("/rank{}/plans.jsonl", r);
    EXPECT_EQ(jsonLines(resumed.runDir() + log), jsonLines(full.runDir() + log)) << log;
  }
}

TEST_F(ControllerTrainTest, AResumedRunLogsEveryStepOnceAndItsNoiseScaleGoesOn) {
  // A kill lands after the last checkpoint, so the killed run has logged
  // steps the resumed run trains again. Here the newest checkpoint (step 40)
  // is deleted on both ranks, as if the kill had come before it was written:
  // the run resumes at step 30 and redoes 31-40. Its decision log must hold
  // each gradient noise measurement (steps 10, 20, 30, 40) once, with the
  // uninterrupted run's estimates and B_simple (the resumed run's gradients
  // are the same bit for bit, and the running sums come from the
  // checkpoint), and nothing of the undone steps before its `resume` record.
  // Before, step 40 was logged twice and the redone B_simple started over.
  const std::string compress =
      "{name: auto, families: [fp16], collectives: [engine], warmup_steps: 5, check_every: 5, noise_every: 10,"
      " probe: {budget_seconds: 0.5}}";
  const auto [full, part] = uninterruptedAndResumedAt30(compress);
  gradzip::testing::expectSamePath(jsonLines(full.runDir() + "/tta.jsonl"), jsonLines(part.runDir() + "/tta.jsonl"),
                                   "fp16@engine");

  auto noise = [](const std::string& runDir) {
    std::vector<nlohmann::json> out;
    for (auto r : jsonLines(runDir + "/decisions.jsonl"))
      if (r["event"] == "noise") {
        r.erase("seconds");
        out.push_back(r);
      }
    return out;
  };
  const auto a = noise(full.runDir()), b = noise(part.runDir());
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a, b);  // steps, |G|², tr(Σ), B_simple: exactly

  int resumes = 0;
  for (const auto& r : jsonLines(part.runDir() + "/decisions.jsonl")) {
    if (r["event"] == "resume") {
      ++resumes;
      EXPECT_EQ(r["step"], 30);
      EXPECT_EQ(r["plan"], "fp16@engine");
    } else if (resumes == 0 && r.contains("step")) {
      EXPECT_LE(r["step"].get<int64_t>(), 30) << "a record of an undone step: " << r.dump();
    }
  }
  EXPECT_EQ(resumes, 1);

  // The steps on the running plan go on from the checkpoint: at step 40 the
  // resumed run counts the steps before step 30 too, as the uninterrupted run
  // does (counted afresh from the resume it would be 10, and price its
  // running plan at the screened floor). The last decision's measured
  // references and the network backoff are saved too; what they hold at step
  // 40 follows the timing of the steps since (a false alarm on a loaded host
  // doubles the backoff), so only the backoff's range is checked.
  const auto fullState = controllerState(full.runDir()), partState = controllerState(part.runDir());
  EXPECT_GT(fullState.planSteps, 10);  // more than the resumed run trained
  EXPECT_EQ(partState.planSteps, fullState.planSteps);
  for (const auto& t : {fullState, partState}) EXPECT_GE(t.networkBackoff, 1);
}

TEST_F(ControllerTrainTest, APinnedResumedRunGoesOnCountingItsStepsOnThePlan) {
  // A pinned run decides too (its decisions keep the pin) and prices the pin
  // by the same settled rule, so its count of steps on the plan
  // (ControllerState::planSteps) must come back from the checkpoint as well:
  // resumed at step 30, it holds the uninterrupted run's count at step 40
  // (before, the pinned path returned before restoring it: 10).
  const std::string compress =
      "{name: auto, families: [fp16], collectives: [engine], warmup_steps: 5, check_every: 5,"
      " probe: {budget_seconds: 0.5}, pin: {name: fp16}}";
  const auto [full, part] = uninterruptedAndResumedAt30(compress);
  const auto fullState = controllerState(full.runDir()), partState = controllerState(part.runDir());
  EXPECT_GT(fullState.planSteps, 10);  // more than the resumed run trained
  EXPECT_EQ(partState.planSteps, fullState.planSteps);
}
