// Shared helpers of the exploration tests (ControllerExploreTest.cpp,
// ControllerExploreNetworkTest.cpp): FakeTimedLoop, a ControlledLoop that
// trains an MLP for real through GradSync but reports step times set per
// compressor, so which candidate is hopeless is known in advance; decide(),
// which runs the Controller over it on a real two-rank Gloo group up to its
// first (or second) decision; and the decision log read back by event.
#pragma once

#include "models/Registry.h"
#include "tests/testing/ThreadGroup.h"
#include "controller/Controller.h"
#include "controller/ControllerOptions.h"
#include "sync/GradSync.h"
#include "sync/Plan.h"
#include "util/Yaml.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gradzip::testing {

// The records of one event ("decision", "followup") in dir/decisions.jsonl.
inline std::vector<nlohmann::json> events(const std::string& dir, const std::string& event) {
  std::vector<nlohmann::json> out;
  std::ifstream in(dir + "/decisions.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto r = nlohmann::json::parse(line);
    if (r["event"] == event) out.push_back(r);
  }
  return out;
}

inline std::vector<nlohmann::json> decisions(const std::string& dir) { return events(dir, "decision"); }

// Real steps of a 784-64-10 MLP (one bucket of 50890 floats, above
// small_bucket_kb) on random data, with step times that depend only on the
// compressor the bucket runs: fp16 0.5 s (0.08 s of compute, 0.02 s of
// other work such as the optimizer's, and 0.4 s waiting for the sync, so the
// predictions' base is 0.1 s and every compressed plan is predicted ~5x
// faster), TopK 10 s (hopeless once measured), TopKC 0.2 s (a real gain).
// The predictions add the codecs' real encode/decode times (1-10 ms on a
// loaded host), which a base of 0.1 s keeps small.
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
    const std::string& c = sync_.plan(0).compressor;
    const double seconds = seconds_.at(c);
    const double compute = compute_.count(c) ? compute_.at(c) : kCompute;
    return {seconds, compute, seconds - compute - kOther, 0, seconds - compute - kOther, 0};
  }

  trainer::StepMeasure exploreStep() override {
    if (!canSnapshot_) ADD_FAILURE() << "exploreStep() called on a loop that cannot snapshot";
    ++explored_[sync_.plan(0).compressor];
    return step();
  }
  // As the trainer's loop: the compressor states of the snapshot are kept,
  // those made since (the explored plans') dropped; the MLP's parameters
  // and data go on (the step times, not the training, are under test).
  std::string snapshot() override {
    if (!canSnapshot_) ADD_FAILURE() << "snapshot() called on a loop that cannot snapshot";
    keys_ = sync_.compressorKeys();
    return "state";
  }
  void restore(const std::string& snap) override {
    if (!canSnapshot_) ADD_FAILURE() << "restore() called on a loop that cannot snapshot";
    ASSERT_EQ(snap, "state");
    sync_.keepOnly(keys_);
    ++restores_;
  }

  // false: a loop that cannot keep its state in memory (a DDP hook's
  // bridge), which serves `explore: 0`; any call that needs it fails.
  bool canSnapshot_ = true;
  std::map<std::string, int> explored_;  // exploreStep calls per compressor
  int restores_ = 0;
  // Step time per compressor.
  static constexpr double kCompute = 0.08, kOther = 0.02;
  std::map<std::string, double> seconds_{{"fp16", 0.5}, {"bf16", 0.5}, {"topk", 10.0}, {"topkc", 0.2}};
  // Forward+backward per compressor where it is not kCompute (the host's
  // load while that plan's steps ran).
  std::map<std::string, double> compute_;

 private:
  static std::vector<std::pair<std::string, torch::Tensor>> named(torch::nn::Module& m) {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (auto& kv : m.named_parameters()) out.emplace_back(kv.key(), kv.value());
    return out;
  }

  std::shared_ptr<models::Model> model_;
  trainer::GradSync sync_;
  std::vector<std::vector<std::string>> keys_;  // the compressor states at the snapshot
  int rank_;
  int64_t step_ = 0;
};

// Whether a plan key ("topkc{bits: 2}@engine", "fp16@engine") runs `compressor`.
inline bool runs(const nlohmann::json& key, const std::string& compressor) {
  const std::string k = key.get<std::string>();
  return k.rfind(compressor, 0) == 0 && k.size() > compressor.size() &&
         (k[compressor.size()] == '{' || k[compressor.size()] == '@');
}

struct Explored {
  std::map<std::string, int> calls;  // rank 0's exploreStep calls per compressor
  int restores = 0;
  nlohmann::json decision;
};

// The races' model: a 784-64-10 MLP from seed 3, made under `mu` because
// torch::manual_seed is process-global and every rank is a thread.
inline std::shared_ptr<models::Model> seededMlp(std::mutex& mu) {
  models::ModelOptions mo;
  mo.name = "mlp";
  mo.numClasses = 10;
  mo.mlp.inputSize = 784;
  mo.mlp.hidden = {64};
  std::lock_guard<std::mutex> lock(mu);
  torch::manual_seed(3);
  return models::makeModel(mo);
}

// Five steps on fp16, then the first decision (step 5), among the candidates
// of `families`; `options` go into the controller's YAML flow map (the
// callers set check_every). With a
// non-empty `then`, the step times change to it `thenAfter` steps after
// that decision (and every send is held back by `thenDelay`: the collectives
// over point-to-point slow down too) and training goes on until a second
// decision (at most step 100); the calls and restores counted are the last
// decision's. With an empty `then`, `stepsAfter` steps follow the first
// decision on the plan it chose. `tune` sets the loop's timings before
// the first step (then the references are the caller's to check).
inline Explored decide(const std::string& dir, const std::string& options,
                       const std::map<std::string, double>& then, const std::string& families, int64_t thenAfter = 0,
                       std::chrono::microseconds thenDelay = {}, const std::string& collectives = "[engine, allgather]",
                       std::chrono::microseconds startDelay = {}, int64_t stepsAfter = 0,
                       const std::function<void(FakeTimedLoop&)>& tune = {}) {
  Explored out;
  std::mutex mu;
  gradzip::testing::runRanks(
      2,
      [&](comm::Communicator& c) {
        auto model = seededMlp(mu);
        auto r = YamlReader::loadString(
            "{families: " + families + ", collectives: " + collectives + ", ratios: [0.01], topkc_bits: [2],"
            " time_weight: 0.85, warmup_steps: 5, provisional_step: 0, explore: 2,"
            " explore_steps: 6, probe: {budget_seconds: 0.3}, " +
                options + "}",
            "race.yaml");
        auto opts = trainer::ControllerOptions::fromYaml(r);
        FakeTimedLoop loop(c, model);
        if (tune) tune(loop);
        trainer::Controller controller(opts, c, loop.sync(), dir);
        controller.start(0);
        // After the start-up probe (α), so β settles from the delayed
        // collectives of the first steps (LinkEstimator::settleBeta).
        c.setSendDelay(startDelay);
        for (int64_t s = 1; s <= 5; ++s) controller.afterStep(s, loop.step(), loop);
        ASSERT_EQ(controller.decisions(), 1);
        for (int64_t s = 6; then.empty() && s < 6 + stepsAfter; ++s) controller.afterStep(s, loop.step(), loop);
        if (!then.empty()) {
          loop.explored_.clear();
          loop.restores_ = 0;
          for (int64_t s = 6; s <= 100 && controller.decisions() == 1; ++s) {
            if (s == 6 + thenAfter) {
              loop.seconds_ = then;
              c.setSendDelay(thenDelay);
            }
            controller.afterStep(s, loop.step(), loop);
          }
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
  // Every decision's step-time trigger references are one quantity: the
  // chosen plan's step time and its step − compute (here step − 0.08 s),
  // whether measured (explored, or the running plan's steps) or predicted
  // (the predicted knee: its predicted step less the compute, not its
  // exposed sync alone, which leaves out the other 0.02 s).
  for (const auto& r : d) {
    if (tune) break;
    EXPECT_TRUE(r.contains("references")) << r.dump();
    if (!r.contains("references")) continue;
    const auto& ref = r["references"];
    EXPECT_NEAR(ref["sync"].get<double>(), ref["step"].get<double>() - FakeTimedLoop::kCompute, 1e-9) << r.dump();
  }
  if (!d.empty()) out.decision = d.back();
  return out;
}

// The candidates of the race tests: TopK (all-gather) and TopKC (engine,
// all-gather), the running fp16@engine not among them, so the two explored
// are one TopK and one TopKC whatever loopback's timings. With fp16 a family,
// fp16@allgather is a candidate too, predicted from the start probe's α and
// β; on a loaded host (β fitted at 0) it can be the knee and take TopK's
// place among the two explored.
inline const std::string kSparseOnly = "[topk, topkc]";

// Every plan over gradzip's ring (point-to-point: Communicator::setSendDelay
// slows it), the initial one included.
inline const std::string kRingOnly = "initial: {name: fp16, collective: ring}, ";

}  // namespace gradzip::testing
