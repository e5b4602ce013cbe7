// Tests that the controller's excursions leave training as if they had not
// happened (controller/Controller.h, on two Gloo thread ranks): a pinned
// controller that explores trains bit for bit like the static plan it is
// pinned to, residuals included; every part of the training state
// (trainer/Trainer.h StateTensors) is put back after each explored candidate;
// and the provisional rewind, from fp16 or from a sparse start, leaves no
// state of the undone steps, so the run trains like the static plan it chose
// from step zero.
#include "tests/compress/AggregateHarness.h"
#include "tests/controller/ControllerTesting.h"
#include "controller/BandwidthSounding.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace gradzip;
using gradzip::testing::config;
using gradzip::testing::expectTheSameStepsOnEveryRank;
using gradzip::testing::jsonLines;

namespace {

// The names under which `a` and `b` (trainer/Trainer.h StateTensors) hold
// tensors that are not the same bit for bit (bitEqual), or hold a tensor the
// other has not.
std::vector<std::string> differing(const trainer::StateTensors& a, const trainer::StateTensors& b) {
  std::map<std::string, at::Tensor> of(b.begin(), b.end());
  std::vector<std::string> out;
  for (const auto& [name, t] : a) {
    const auto it = of.find(name);
    if (it == of.end() || !gradzip::testing::bitEqual(t, it->second)) out.push_back(name);
    if (it != of.end()) of.erase(it);
  }
  for (const auto& kv : of) out.push_back(kv.first + " (only in the second)");
  return out;
}

}  // namespace

TEST_F(ControllerTrainTest, PinnedExplorationLeavesTrainingBitIdentical) {
  // TopK with error feedback keeps a residual, momentum SGD keeps a buffer, and
  // the data loader a position: if exploration (from step 10 on, every 10
  // steps, 3 candidates x 3 steps) restored any of them imperfectly, the
  // pinned run's losses would part from the static run's. time_weight 0
  // ranks by vNMSE alone, so fp16 and cnat (vNMSE <= 1/8) could always
  // replace TopK 10% and are explored however the host's load moves the
  // step times (explore_margin's filter would otherwise depend on them).
  const std::string topk = "{name: topk, collective: allgather, topk: {ratio: 0.1}}";
  auto stat = config(dir.path() + "/static", topk, 60);
  auto pinned = config(dir.path() + "/pinned",
                       "{name: auto, pin: " + topk +
                           ", families: [fp16, topk, cnat], warmup_steps: 10, min_interval: 10, check_every: 10,"
                           " gain_drift: 0.001, explore: 3, explore_steps: 3, time_weight: 0,"
                           " probe: {budget_seconds: 0.5}}",
                       60);
  train(stat);
  train(pinned);
  const auto a = jsonLines(stat.runDir() + "/tta.jsonl"), b = jsonLines(pinned.runDir() + "/tta.jsonl");
  ASSERT_EQ(a.size(), 6u);
  gradzip::testing::expectSamePath(a, b, "topk{ratio: 0.1}@allgather");
  // It did explore: every decision lists measured candidates, except
  // network-type ones (loopback's timing noise) that kept the running plan
  // or adopted the predicted knee without exploring.
  int explored = 0;
  double exploring = 0;
  for (const auto& r : jsonLines(pinned.runDir() + "/decisions.jsonl")) {
    if (r["event"] != "decision") continue;
    EXPECT_TRUE(r["pinned"].get<bool>());
    if (r["explored"].empty()) {
      EXPECT_TRUE(r.contains("kept") || r.contains("adopted")) << r.dump();
      continue;
    }
    ++explored;
    for (const auto& e : r["explored"]) EXPECT_GT(e["measured_step"].get<double>(), 0) << r.dump();
    exploring += r["explore_seconds"].get<double>();
  }
  EXPECT_GE(explored, 1);
  // The exploration time is charged to training time: the run's clock holds it
  // on top of its 60 steps, each of which takes time too.
  EXPECT_GT(b.back()["train_seconds"].get<double>(), exploring);
}

TEST_F(ControllerTrainTest, ExplorationPutsEveryPartOfTheTrainingStateBackBitForBit) {
  // Directly, on each rank: the live training state (trainer/Trainer.h
  // StateTensors: parameters (the MLP has no buffers), the optimizer's
  // momentum, every GradSync compressor state with TopK's error-feedback
  // residual and each bucket's last plan, the step and progress counters, the
  // data position, the CPU generator, which these steps do not draw from)
  // when the step-10 decision keeps it in memory, against the state after
  // each explored candidate is undone: the same bit for bit, and no
  // compressor state of the explored plan left over.
  // Pinned to TopK 10% (error feedback) with time_weight 0, so what is
  // explored (fp16, the knee, and maybe cnat: lower vNMSE) does not depend on
  // the host's load; explore_min_steps 0: no race, 3 steps each. Just before each
  // restore the state must differ in every part those steps move, or the
  // comparison would prove nothing: the parameters, the momentum, TopK's
  // residual (handed to the explored plan at its first step, GradSync::
  // setPlan), the bucket's last plan, the step and the data position.
  const std::string topk = "{name: topk, collective: allgather, topk: {ratio: 0.1}}";
  const std::string running = "topk{ratio: 0.1}@allgather";
  auto cfg = config(dir.path(),
                    "{name: auto, pin: " + topk +
                        ", families: [fp16, topk, cnat], warmup_steps: 10, check_every: 10, min_interval: 100,"
                        " explore: 2, explore_steps: 3, explore_min_steps: 0, time_weight: 0,"
                        " probe: {budget_seconds: 0.5}}",
                    10);
  struct Seen {
    std::string event;
    int64_t step;
    trainer::StateTensors state;
  };
  std::vector<Seen> seen[2];  // per rank, written by its own thread
  gradzip::testing::runRanks(
      2,
      [&](comm::Communicator& c) {
        trainer::Trainer t(cfg, c);
        t.observeSnapshots([&seen, rank = c.rank()](const std::string& event, int64_t step,
                                                    const trainer::StateTensors& state) {
          seen[rank].push_back({event, step, state});
        });
        t.run(false);
      },
      std::chrono::seconds(60));
  std::vector<nlohmann::json> decisions;
  for (const auto& r : jsonLines(cfg.runDir() + "/decisions.jsonl"))
    if (r["event"] == "decision") decisions.push_back(r);
  ASSERT_EQ(decisions.size(), 1u);
  const auto& explored = decisions[0]["explored"];
  ASSERT_GE(explored.size(), 1u) << decisions[0].dump();
  for (const auto& e : explored) {
    EXPECT_NE(e["plan"], running);  // a different plan: it takes the bucket's residual over
    EXPECT_EQ(e["steps"], 2) << e.dump();  // timed: all but the first of the 3
  }
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const auto& ev = seen[rank];
    ASSERT_EQ(ev.size(), 1 + 2 * explored.size());
    ASSERT_EQ(ev[0].event, "snapshot");
    EXPECT_EQ(ev[0].step, 10);
    const auto& kept = ev[0].state;
    // The state covers every part named above.
    std::set<std::string> parts;
    for (const auto& [name, t] : kept) parts.insert(name.substr(0, name.find('/')));
    EXPECT_EQ(parts, (std::set<std::string>{"model", "optimizer", "gradsync", "progress", "data", "rng"}));
    std::string residual;  // the running plan's residual in some bucket
    for (const auto& [name, t] : kept)
      if (name.find("/" + running + "/residual") != std::string::npos && t.numel() > 0) residual = name;
    ASSERT_FALSE(residual.empty()) << "no error-feedback residual of " << running << " in the snapshot";
    for (size_t i = 1; i < ev.size(); i += 2) {
      SCOPED_TRACE(explored[i / 2]["plan"].get<std::string>());
      ASSERT_EQ(ev[i].event, "before_restore");
      ASSERT_EQ(ev[i + 1].event, "restored");
      EXPECT_EQ(ev[i].step, 13);
      EXPECT_EQ(ev[i + 1].step, 10);
      const auto moved = differing(kept, ev[i].state);
      const auto movedAny = [&](const std::string& part, const std::string& tail = "") {
        return std::any_of(moved.begin(), moved.end(), [&](const std::string& n) {
          return n.rfind(part, 0) == 0 && n.size() >= tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
        });
      };
      EXPECT_TRUE(movedAny("model/")) << fmt::format("{}", fmt::join(moved, ", "));
      EXPECT_TRUE(movedAny("optimizer/", "momentum_buffer")) << fmt::format("{}", fmt::join(moved, ", "));
      EXPECT_TRUE(movedAny(residual)) << fmt::format("{}", fmt::join(moved, ", "));
      EXPECT_TRUE(movedAny("gradsync/", "last_plan")) << fmt::format("{}", fmt::join(moved, ", "));
      EXPECT_TRUE(movedAny("progress/fields")) << fmt::format("{}", fmt::join(moved, ", "));
      EXPECT_TRUE(movedAny("data/position")) << fmt::format("{}", fmt::join(moved, ", "));
      const auto back = differing(kept, ev[i + 1].state);
      EXPECT_TRUE(back.empty()) << "not restored: " << fmt::format("{}", fmt::join(back, ", "));
    }
  }
  // And every rank logged the same plan for each step, the explored ones too.
  EXPECT_EQ(expectTheSameStepsOnEveryRank(cfg.runDir(), 10).size(), explored.size());
}

TEST_F(ControllerTrainTest, TheProvisionalRewindTrainsLikeTheStaticPlanFromStepZero) {
  // With TopKC b=2 on the engine the only candidate, the provisional step
  // leaves fp16 for it and undoes the two fp16 steps before it: the momentum
  // they built (a state from before the first step has none, which restoring
  // must not keep), their data position and RNG. The run then trains bit for
  // bit like the static plan, while its clock holds the undone steps too.
  // Without the rewind the two fp16 steps stay in the model.
  const std::string topkc = "{name: topkc, collective: engine, topkc: {bits: 2}}";
  const std::string opts =
      "families: [topkc], topkc_bits: [2], collectives: [engine], warmup_steps: 10, probe: {budget_seconds: 0.5}";
  auto stat = config(dir.path() + "/static", topkc, 30);
  auto rewound = config(dir.path() + "/rewound", "{name: auto, " + opts + "}", 30);
  auto kept = config(dir.path() + "/kept", "{name: auto, provisional_rewind: false, " + opts + "}", 30);
  train(stat);
  train(rewound);
  train(kept);
  const auto a = jsonLines(stat.runDir() + "/tta.jsonl"), b = jsonLines(rewound.runDir() + "/tta.jsonl"),
             c = jsonLines(kept.runDir() + "/tta.jsonl");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  ASSERT_EQ(c.size(), 3u);
  gradzip::testing::expectSamePath(a, b, "topkc{bits: 2}@engine");
  int differs = 0;
  for (size_t i = 0; i < a.size(); ++i) differs += a[i]["loss"].get<double>() != c[i]["loss"].get<double>();
  EXPECT_GT(differs, 0) << "the kept fp16 steps left no trace";
  std::optional<nlohmann::json> p;
  for (const auto& r : jsonLines(rewound.runDir() + "/decisions.jsonl"))
    if (r["event"] == "provisional") p = r;
  ASSERT_TRUE(p);
  EXPECT_EQ(p->at("step"), 2);
  EXPECT_EQ(p->at("chosen"), "topkc{bits: 2}@engine");
  EXPECT_EQ(p->at("rewound"), (nlohmann::json{{"to_step", 0}, {"steps", 2}}));
  // Charged: the two undone steps and the screening, all inside the first row's clock.
  EXPECT_GT(p->at("charged_seconds").get<double>(), p->at("seconds").get<double>());
  EXPECT_GT(b[0]["train_seconds"].get<double>(), p->at("charged_seconds").get<double>());
  // Every rank restarted on the plan at step 0, after the two undone fp16 steps.
  const auto r0 = jsonLines(rewound.runDir() + "/rank0/plans.jsonl"), r1 = jsonLines(rewound.runDir() + "/rank1/plans.jsonl");
  EXPECT_EQ(r0, r1);
  const auto undone = expectTheSameStepsOnEveryRank(rewound.runDir(), 30);
  ASSERT_FALSE(undone.empty());
  EXPECT_EQ(undone[0], (nlohmann::json{{"step", 0}, {"plan", "fp16@engine"}, {"steps", 2}, {"by", "provisional_rewind"}}));
  ASSERT_GE(r0.size(), 2u);
  EXPECT_EQ(r0[1]["step"], 0);
  EXPECT_EQ(r0[1]["plan"], "topkc{bits: 2}@engine");
  for (const auto& r : jsonLines(kept.runDir() + "/decisions.jsonl"))
    if (r["event"] == "provisional") {
      EXPECT_FALSE(r.contains("rewound")) << r.dump();
    }
  EXPECT_EQ(jsonLines(kept.runDir() + "/rank0/plans.jsonl").at(1)["step"], 2);

  // Evaluating every step: the steps the rewind may undo are not evaluated,
  // so the TTA log has one row per step, in order, all of the kept path.
  auto every = gradzip::testing::mlpConfig(dir.path() + "/every", "{name: auto, " + opts + "}",
                                           "train: {max_steps: 4, eval_every: 1, eval_batches: 1}\ncomm: {timeout_s: 30}\n",
                                           "{name: sgd, lr: 0.05, momentum: 0.9}");
  train(every);
  const auto rows = jsonLines(every.runDir() + "/tta.jsonl");
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["step"], int64_t(i) + 1);
    EXPECT_EQ(rows[i]["plan"], "topkc{bits: 2}@engine");
  }
}

TEST_F(ControllerTrainTest, ASparseStartMeasuresOnTheSparsePlanAndRewindsToTheChoice) {
  // sparse_start_above 0: the loopback's fp16 sync counts as slow, so steps
  // 0-1 run TopK 0.1% all-gather, β comes from two timed all-reduces at step
  // 2 instead of the steps' (latency-bound) collectives, and the provisional
  // step rewinds to step 0 on its choice, whatever it is: with TopKC b=2 the
  // only candidate, the run then trains bit for bit like the static TopKC
  // arm; with fp16 the only one (`initial` itself, which the steps did not
  // run), like the static fp16 arm.
  for (const std::string family : {"topkc", "fp16"}) {
    SCOPED_TRACE(family);
    const std::string compress = family == "topkc" ? "{name: topkc, collective: engine, topkc: {bits: 2}}"
                                                    : "{name: fp16, collective: engine}";
    const std::string chosen = family == "topkc" ? "topkc{bits: 2}@engine" : "fp16@engine";
    const std::string opts = "families: [" + family + "], topkc_bits: [2], collectives: [engine], warmup_steps: 10," +
                             " sparse_start_above: 0, probe: {budget_seconds: 0.5}";
    auto stat = config(dir.path() + "/static_" + family, compress, 30);
    auto sparse = config(dir.path() + "/sparse_" + family, "{name: auto, " + opts + "}", 30);
    train(stat);
    train(sparse);
    const auto a = jsonLines(stat.runDir() + "/tta.jsonl"), b = jsonLines(sparse.runDir() + "/tta.jsonl");
    ASSERT_EQ(a.size(), 3u);
    gradzip::testing::expectSamePath(a, b, chosen);
    std::optional<nlohmann::json> start, beta, p;
    for (const auto& r : jsonLines(sparse.runDir() + "/decisions.jsonl")) {
      if (r["event"] == "start") start = r;
      if (r["event"] == "beta") beta = r;
      if (r["event"] == "provisional") p = r;
    }
    ASSERT_TRUE(start && beta && p);
    EXPECT_EQ(start->at("plan"), "topk{ratio: 0.001}@allgather");
    ASSERT_TRUE(start->contains("sparse_start")) << start->dump();
    EXPECT_GT(start->at("initial_sync_predicted").get<double>(), 0);
    // Past a token bucket's burst, whole floats split evenly over the ranks.
    const auto bytes = start->at("sparse_start")["sounding_bytes"].get<int64_t>();
    EXPECT_GE(bytes, trainer::BandwidthSounding::kMinBytes);
    EXPECT_EQ(bytes % 8, 0);
    EXPECT_EQ(beta->at("step"), 2);
    EXPECT_GT(beta->at("beta").get<double>(), 0);
    EXPECT_NE(beta->at("from").get<std::string>().find("sparse start"), std::string::npos) << beta->dump();
    EXPECT_EQ(p->at("measured_on"), "topk{ratio: 0.001}@allgather");
    EXPECT_EQ(p->at("chosen"), chosen);
    EXPECT_EQ(p->at("rewound"), (nlohmann::json{{"to_step", 0}, {"steps", 2}}));
    EXPECT_FALSE(p->contains("kept")) << p->dump();
    const auto r0 = jsonLines(sparse.runDir() + "/rank0/plans.jsonl"),
               r1 = jsonLines(sparse.runDir() + "/rank1/plans.jsonl");
    EXPECT_EQ(r0, r1);
    ASSERT_GE(r0.size(), 2u);
    EXPECT_EQ(r0[0]["plan"], "topk{ratio: 0.001}@allgather");
    EXPECT_EQ(r0[1]["step"], 0);
    EXPECT_EQ(r0[1]["plan"], chosen);
    // The undone steps left no compressor state behind either: the sparse
    // plan's error-feedback residual is gone from every bucket of the final
    // checkpoint, while the chosen plan's is there.
    for (int rank = 0; rank < 2; ++rank) {
      torch::serialize::InputArchive ar, sync;
      ar.load_from(sparse.runDir() + "/rank" + std::to_string(rank) + "/checkpoint.pt");
      ar.read("gradsync", sync);
      int chosenStates = 0;
      for (int k = 0; k < 16; ++k) {
        torch::serialize::InputArchive state;
        EXPECT_FALSE(sync.try_read("bucket" + std::to_string(k) + "/topk{ratio: 0.001}@allgather", state))
            << "rank " << rank << " bucket " << k;
        chosenStates += sync.try_read("bucket" + std::to_string(k) + "/" + chosen, state);
      }
      EXPECT_GE(chosenStates, 1) << "rank " << rank;
    }
  }
}
