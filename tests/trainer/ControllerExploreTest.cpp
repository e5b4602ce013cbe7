// Tests of the controller's exploration race (trainer/Controller.h, option
// explore_min_steps) on a real two-rank Gloo group: the Controller drives a
// test ControlledLoop that trains an MLP for real through GradSync but reports
// step times set per compressor, so which candidate is hopeless is known in
// advance and the number of exploration steps each one gets is exact.
#include "models/Registry.h"
#include "tests/testing/ThreadGroup.h"
#include "trainer/Controller.h"
#include "util/Yaml.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <fstream>
#include <map>
#include <mutex>

using namespace gradzip;

namespace {

std::vector<nlohmann::json> decisions(const std::string& dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(dir + "/decisions.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto r = nlohmann::json::parse(line);
    if (r["event"] == "decision") out.push_back(r);
  }
  return out;
}

// Real steps of a 784-64-10 MLP (one bucket of 50890 floats, above
// small_bucket_kb) on random data, with step times that depend only on the
// compressor the bucket runs: fp16 0.05 s (0.04 s of it communication, so the
// predictions' base is 0.01 s and every compressed plan is predicted ~5x
// faster), TopK 1 s (hopeless once measured), TopKC 0.02 s (a real gain).
class FakeTimedLoop final : public trainer::ControlledLoop {
 public:
  FakeTimedLoop(comm::Communicator& comm, std::shared_ptr<models::Model> model)
      : model_(std::move(model)), sync_(named(*model_), comm, trainer::GradSyncOptions{}, fp16()), rank_(comm.rank()) {}

  static trainer::Plan fp16() {
    trainer::Plan p;
    p.compressor = "fp16";
    p.collective = "engine";
    return p;
  }

  trainer::GradSync& sync() { return sync_; }

  // One real step; the measure the Controller sees.
  trainer::StepMeasure step() {
    sync_.setMeasureCompression(true);
    sync_.beginStep(step_);
    auto g = at::make_generator<at::CPUGeneratorImpl>(100 * step_ + rank_);
    auto x = torch::randn({8, 784}, g);
    auto y = torch::randint(0, 10, {8}, g);
    model_->zero_grad();
    torch::nn::functional::cross_entropy(model_->forward(x), y).backward();
    sync_.finishStep();
    ++step_;
    const double seconds = seconds_.at(sync_.plan(0).compressor);
    return {seconds, 0.01, 0, 0, seconds - 0.01, 0};
  }

  trainer::StepMeasure exploreStep() override {
    ++explored_[sync_.plan(0).compressor];
    return step();
  }
  std::string snapshot() override { return "state"; }
  void restore(const std::string& snap) override {
    ASSERT_EQ(snap, "state");
    ++restores_;
  }

  std::map<std::string, int> explored_;  // exploreStep calls per compressor
  int restores_ = 0;
  std::map<std::string, double> seconds_{{"fp16", 0.05}, {"topk", 1.0}, {"topkc", 0.02}};  // step time per compressor

 private:
  static std::vector<std::pair<std::string, torch::Tensor>> named(torch::nn::Module& m) {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (auto& kv : m.named_parameters()) out.emplace_back(kv.key(), kv.value());
    return out;
  }

  std::shared_ptr<models::Model> model_;
  trainer::GradSync sync_;
  int rank_;
  int64_t step_ = 0;
};

// Whether a plan key ("topkc{bits: 2}@engine", "fp16@engine") runs `compressor`.
bool runs(const nlohmann::json& key, const std::string& compressor) {
  const std::string k = key.get<std::string>();
  return k.rfind(compressor, 0) == 0 && k.size() > compressor.size() &&
         (k[compressor.size()] == '{' || k[compressor.size()] == '@');
}

struct Explored {
  std::map<std::string, int> calls;  // rank 0's exploreStep calls per compressor
  int restores = 0;
  nlohmann::json decision;
};

// Five steps on fp16, then the first decision (step 5); `options` go into the
// controller's YAML flow map. With `then`, the step times change to it after
// that decision and training goes on until a second decision (at most step
// 100); the calls and restores counted are the last decision's.
Explored decide(const std::string& dir, const std::string& options,
                const std::map<std::string, double>& then = {}) {
  Explored out;
  std::mutex mu;
  gradzip::testing::runRanks(
      2,
      [&](comm::Communicator& c) {
        models::ModelOptions mo;
        mo.name = "mlp";
        mo.numClasses = 10;
        mo.mlp.inputSize = 784;
        mo.mlp.hidden = {64};
        std::shared_ptr<models::Model> model;
        {
          std::lock_guard<std::mutex> lock(mu);  // torch::manual_seed is process-global
          torch::manual_seed(3);
          model = models::makeModel(mo);
        }
        auto r = YamlReader::loadString(
            "{families: [fp16, topk, topkc], collectives: [engine, allgather], ratios: [0.01], topkc_bits: [2],"
            " time_weight: 0.85, warmup_steps: 5, provisional_step: 0, check_every: 5, explore: 2,"
            " explore_steps: 6, probe: {budget_seconds: 0.3}, " +
                options + "}",
            "race.yaml");
        auto opts = trainer::ControllerOptions::fromYaml(r);
        FakeTimedLoop loop(c, model);
        trainer::Controller controller(opts, c, loop.sync(), dir);
        controller.start(0);
        for (int64_t s = 1; s <= 5; ++s) controller.afterStep(s, loop.step(), loop);
        ASSERT_EQ(controller.decisions(), 1);
        if (!then.empty()) {
          loop.seconds_ = then;
          loop.explored_.clear();
          loop.restores_ = 0;
          for (int64_t s = 6; s <= 100 && controller.decisions() == 1; ++s) controller.afterStep(s, loop.step(), loop);
          ASSERT_EQ(controller.decisions(), 2);
        }
        if (c.rank() == 0) {
          out.calls = loop.explored_;
          out.restores = loop.restores_;
        }
      },
      std::chrono::seconds(60));
  const auto d = decisions(dir);
  EXPECT_EQ(d.size(), then.empty() ? 1u : 2u);
  if (!d.empty()) out.decision = d.back();
  return out;
}

}  // namespace

TEST(ControllerExplore, AHopelessCandidateStopsAfterExploreMinSteps) {
  // TopK measures 1 s a step against the running fp16's 0.05 s: after 2 timed
  // steps (3 calls, the first untimed) even its fastest step cannot replace
  // fp16, so it stops; TopKC (0.02 s) could, runs all 6 and is chosen.
  gradzip::testing::TempDir dir;
  const auto e = decide(dir.path(), "explore_min_steps: 2");
  const auto& d = e.decision;
  ASSERT_EQ(d["explored"].size(), 2u) << d.dump();
  EXPECT_EQ(e.calls.at("topk"), 3) << d.dump();
  EXPECT_EQ(e.calls.at("topkc"), 6) << d.dump();
  EXPECT_EQ(e.restores, 2);
  for (const auto& x : d["explored"]) {
    const bool topk = runs(x["plan"], "topk");
    EXPECT_EQ(x["stopped_early"].get<bool>(), topk) << x.dump();
    EXPECT_EQ(x["steps"].get<int64_t>(), topk ? 2 : 5) << x.dump();
    EXPECT_DOUBLE_EQ(x["measured_step"].get<double>(), topk ? 1.0 : 0.02) << x.dump();
    EXPECT_DOUBLE_EQ(x["fastest_step"].get<double>(), topk ? 1.0 : 0.02) << x.dump();
  }
  EXPECT_TRUE(runs(d["chosen"], "topkc")) << d.dump();
}

TEST(ControllerExplore, WithoutTheRaceEveryCandidateRunsExploreSteps) {
  gradzip::testing::TempDir dir;
  const auto e = decide(dir.path(), "explore_min_steps: 0");
  EXPECT_EQ(e.calls.at("topk"), 6) << e.decision.dump();
  EXPECT_EQ(e.calls.at("topkc"), 6) << e.decision.dump();
  for (const auto& x : e.decision["explored"]) EXPECT_FALSE(x["stopped_early"].get<bool>()) << x.dump();
  EXPECT_TRUE(runs(e.decision["chosen"], "topkc")) << e.decision.dump();
}

TEST(ControllerExplore, ANetworkDecisionRacesTheCandidatesAgainstEachOther) {
  // After the first decision (TopKC, 0.02 s a step) TopKC's steps take 0.5 s
  // with 0.49 s of it synchronisation: a step_time decision, which re-measures
  // the running TopKC along with the candidates, so no measurement holds at
  // its start. The first candidate explored runs all 6 steps; every later one
  // races the knee of those measured before it. fp16 (0.05 s) wins; TopK
  // (1 s) and TopKC (0.5 s) stop after 2 timed steps once fp16 is measured.
  gradzip::testing::TempDir dir;
  const auto e = decide(dir.path(), "explore_min_steps: 2, network_interval: 10",
                        {{"fp16", 0.05}, {"topk", 1.0}, {"topkc", 0.5}});
  const auto& d = e.decision;
  EXPECT_EQ(d["trigger"], "step_time") << d.dump();
  ASSERT_EQ(d["explored"].size(), 3u) << d.dump();  // two candidates and the running plan
  EXPECT_TRUE(runs(d["explored"].back()["plan"], "topkc")) << d.dump();
  bool fp16Seen = false;
  int calls = 0;
  for (size_t i = 0; i < d["explored"].size(); ++i) {
    const auto& x = d["explored"][i];
    const bool fp16 = runs(x["plan"], "fp16");
    const bool stops = fp16Seen && !fp16;  // a loser explored after the winner
    EXPECT_EQ(x["stopped_early"].get<bool>(), stops) << i << " " << d.dump();
    EXPECT_EQ(x["steps"].get<int64_t>(), stops ? 2 : 5) << i << " " << d.dump();
    calls += stops ? 3 : 6;
    fp16Seen = fp16Seen || fp16;
  }
  EXPECT_TRUE(fp16Seen) << d.dump();
  int counted = 0;
  for (const auto& [compressor, n] : e.calls) counted += n;
  EXPECT_EQ(counted, calls) << d.dump();
  EXPECT_LT(calls, 18) << "no candidate was stopped early: " << d.dump();
  EXPECT_EQ(e.restores, 3);
  EXPECT_TRUE(runs(d["chosen"], "fp16")) << d.dump();
}
