// Tests of `gradzip simulate` (cli/Simulate.h) on hand-written decision logs:
// the run profile read back from them, the predicted step and time to target
// of each plan at other worker counts, the validation of past decisions'
// predictions against their follow-ups and measured times to target, and the
// overlap model that predicts only the sync backward does not hide. They run
// in the controller's test executable (it links gradzip_cli) because they
// read the controller's decision log.
#include "cli/Simulate.h"
#include "comm/CostModel.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

using namespace gradzip;

TEST(Simulate, PredictsFromTheDecisionLog) {
  // A hand-written decision log: N = 2, α = 1 ms, 100 Mbit/s, one bucket of
  // 10^6 coordinates, base step 50 ms; fp16@engine (16 bits, 2 ms codec) and
  // topk{ratio: 0.01}@allgather (0.48 bits, 5 ms codec).
  gradzip::testing::TempDir dir;
  const double beta = 8.0 / 100e6;
  {
    std::ofstream f(dir.path() + "/decisions.jsonl");
    f << R"({"event":"start","world_size":2,"alpha":0.001,"beta":)" << beta << "}\n"
      << R"({"event":"decision","step":20,"world_size":2,"alpha":0.001,"beta":)" << beta
      << R"(,"base_step":0.05,"buckets":[1000000],"candidates":[)"
      << R"({"plan":"fp16@engine","ok":true,"bits":16,"encode_decode":0.002,"vnmse":1e-8,"gain":1},)"
      << R"({"plan":"topk{ratio: 0.01}@allgather","ok":true,"bits":0.48,"encode_decode":0.009,"vnmse":0.7,"gain":0.5},)"
      << R"({"plan":"cnat@ps","ok":false,"bits":8,"encode_decode":0,"vnmse":null,"gain":null}]})" << "\n"
      << R"({"event":"followup","decision_step":20,"plan":"fp16@engine","measured_step":0.4,)"
      << R"("measured_base":0.1,"measured_exposed":0.3})" << "\n"
      // A later gain decision that screened TopK's grid alone (gain_scope:
      // family): TopK from it (5 ms, vNMSE 0.5: the numbers below), fp16
      // still from step 20.
      << R"({"event":"decision","step":220,"world_size":2,"alpha":0.001,"beta":)" << beta
      << R"(,"base_step":0.05,"buckets":[1000000],"candidates":[)"
      << R"({"plan":"fp16@engine","ok":false,"screened":false},)"
      << R"({"plan":"topk{ratio: 0.01}@allgather","ok":true,"bits":0.48,"encode_decode":0.005,"vnmse":0.5,"gain":0.5},)"
      << R"({"plan":"cnat@ps","ok":false,"screened":false}]})" << "\n"
      // A follow-up as logged before a145a19: no base / exposed split.
      << R"({"event":"followup","decision_step":220,"plan":"topk{ratio: 0.01}@allgather","measured_step":0.07})"
      << "\n"
      // The gradient noise scale: B_noise = 64 / 1 from step 100 on (the
      // record without estimates is skipped).
      << R"({"event":"noise","step":100,"batch":32,"world_size":2,"grad_sq":1.0,"trace":64.0})" << "\n"
      << R"({"event":"noise","step":250,"batch":32,"world_size":2,"grad_sq":null,"trace":null})" << "\n";
    // Evaluations: 0.6 first reached at step 200 (70 s), 0.7 at step 300
    // (100 s); the mean steps of the windows (100 x 0.35, 100 x 0.28, 100 x
    // 0.25 s) leave 7 s and 12 s of training time beyond the steps.
    std::ofstream t(dir.path() + "/tta.jsonl");
    t << R"({"step":100,"train_seconds":40.0,"breakdown":{"step":0.35},"metrics":{"accuracy":0.5}})" << "\n"
      << R"({"step":200,"train_seconds":70.0,"breakdown":{"step":0.28},"metrics":{"accuracy":0.65}})" << "\n"
      << R"({"step":300,"train_seconds":100.0,"breakdown":{"step":0.25},"metrics":{"accuracy":0.72}})" << "\n";
  }
  // No config.yaml, so no targets of its own: only those given are looked up.
  EXPECT_TRUE(trainer::loadRunProfile(dir.path()).reached.empty());
  const auto withTargets = trainer::loadRunProfile(dir.path(), {0.6, 0.7, 0.9});
  ASSERT_EQ(withTargets.reached.size(), 2u);  // 0.9 never reached
  EXPECT_EQ(withTargets.reached.at(0.6).step, 200);
  EXPECT_DOUBLE_EQ(withTargets.reached.at(0.6).seconds, 70.0);
  EXPECT_NEAR(withTargets.reached.at(0.6).overhead, 7.0, 1e-9);
  EXPECT_EQ(withTargets.reached.at(0.7).step, 300);
  EXPECT_NEAR(withTargets.reached.at(0.7).overhead, 12.0, 1e-9);
  const auto p = trainer::loadRunProfile(dir.path());
  ASSERT_EQ(p.candidates.size(), 2u);  // the failed screening is not a candidate
  EXPECT_EQ(p.candidates[0].plan.key(), "fp16@engine");  // from step 20, the latest that screened it
  EXPECT_DOUBLE_EQ(p.candidates[0].encodeDecode, 0.002);
  EXPECT_EQ(p.worldSize, 2);
  // fp16 over a ring at N = 8: 50 + 2 ms + Table I's ring cost of 2 MB.
  const auto net = comm::NetworkParams{0.001, beta};
  EXPECT_NEAR(trainer::predictStep(p, p.candidates[0], 8, net, p.baseStep),
              0.052 + comm::ringAllReduceCost(2e6, 8, net), 1e-9);
  // TopK all-gathers 0.48 bits x 10^6 / 8 = 60 kB from each of N − 1 peers.
  EXPECT_NEAR(trainer::predictStep(p, p.candidates[1], 8, net, p.baseStep),
              0.055 + comm::allGatherCost(60000, 8, net), 1e-9);
  ASSERT_EQ(p.followups.size(), 2u);
  EXPECT_EQ(p.followups[0].plan.key(), "fp16@engine");
  EXPECT_EQ(p.followups[1].decisionStep, 220);
  EXPECT_EQ(p.batch, 32);
  ASSERT_EQ(p.noise.size(), 1u);
  EXPECT_TRUE(std::isnan(p.noiseScale(99)));
  EXPECT_DOUBLE_EQ(p.noiseScale(300), 64.0);
  // 200 steps at 2 x 32 are S_min = 100 (McCandlish et al. §2.3): 103.1 at 64 x 32.
  EXPECT_DOUBLE_EQ(p.stepsAt(200, 64.0 * 32), 200 * (1 + 64.0 / 2048) / 2);
  EXPECT_DOUBLE_EQ(p.followups[0].measuredBase, 0.1);
  EXPECT_TRUE(std::isnan(p.followups[1].measuredBase));
  // The report. N = 2: TopK at 60.8 ms against fp16's 214 ms is worth its
  // 0.5 vNMSE. N = 64: TopK's all-gather grows with N − 1 (63 x 60 kB), fp16's
  // ring does not; the relative knee, ((t − t_min)/t_min, vNMSE), gives fp16
  // (0.36, 0) distance 0.25 against TopK's (0, 0.5) 0.35.
  trainer::SimulateArgs args;
  args.run = dir.path();
  args.workers = {2, 64};
  args.validate = {dir.path()};
  args.timeWeight = 0.5;  // the run has no config.yaml; 0.5 instead of the default 0.85
  args.out = dir.path() + "/sim.md";
  ASSERT_EQ(trainer::simulateCommand(args), 0);
  std::ifstream in(args.out);
  const std::string md((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("| 2 | `topk{ratio: 0.01}@allgather` | 60.8 | 214.0 | 3.52 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 64 | `fp16@engine` | 493.0 | 493.0 | 1.00 |"), std::string::npos) << md;
  // Validation: fp16 at N = 2 predicted 50 + 2 + ring(2 MB) = 214 ms against
  // 400 ms measured; split, base 50 ms against 100 and exposed sync 164 ms
  // against 300. The older follow-up has no split.
  EXPECT_NE(md.find("| " + dir.path() + " | 2 | `fp16@engine` | 214.0 | 400.0 | -46.5% | 50.0 / 100.0 | 164.0 / 300.0 |"),
            std::string::npos)
      << md;
  const auto topk = md.find("| " + dir.path() + " | 2 | `topk{ratio: 0.01}@allgather` |");
  ASSERT_NE(topk, std::string::npos) << md;
  const std::string row = md.substr(topk, md.find('\n', topk) - topk);
  EXPECT_EQ(row.substr(row.size() - 13), "| n/a | n/a |") << row;
  // Without targets there is nothing to check the times to target against.
  EXPECT_NE(md.find("No target was reached by both"), std::string::npos) << md;

  // With targets: the TTA columns (steps to the target x the pick's step,
  // plus the time beyond the steps: 200 x 60.8 ms + 7 s at N = 2), and the
  // times to target validated. 0.6 was reached at step 200, under the
  // step-20 decision's fp16 (214 ms predicted: 42.8 + 7 s against 70 s
  // measured); 0.7 at step 300, under the step-220 decision's TopK (50 + 5 ms
  // + the all-gather).
  args.targets = {0.6, 0.7};
  ASSERT_EQ(trainer::simulateCommand(args), 0);
  std::ifstream in2(args.out);
  const std::string md2((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>());
  EXPECT_NE(md2.find("| 2 | `topk{ratio: 0.01}@allgather` | 60.8 | 214.0 | 3.52 | 19.2 | 30.2 |"), std::string::npos)
      << md2;
  // N = 64: fp16's 493 ms a step, the steps carried by B_noise = 64 from 2 x
  // 32 to 64 x 32: 103.1 + 7 s and 154.7 + 12 s.
  EXPECT_NE(md2.find("| 64 | `fp16@engine` | 493.0 | 493.0 | 1.00 | 57.8 | 88.3 |"), std::string::npos) << md2;
  EXPECT_NE(md2.find("| " + dir.path() +
                     " | 2 | 0.6 | `fp16@engine` | 200 / 200 / 200 | 214.0 | 350.0 | 7.0 / 7.0 | 49.8 | 70.0 | -28.9% |"),
            std::string::npos)
      << md2;
  const double topkTta = 300 * (0.055 + comm::allGatherCost(60000, 2, net)) + 12;
  EXPECT_NE(md2.find(fmt::format("| {} | 2 | 0.7 | `topk{{ratio: 0.01}}@allgather` | 300 / 300 / 300 | 60.8 | 333.3 | "
                                 "12.0 / 12.0 | {:.1f} | 100.0 | {:+.1f}% |",
                                 dir.path(), topkTta, topkTta - 100)),
            std::string::npos)
      << md2;
  EXPECT_NE(md2.find(fmt::format("Largest |error| of the time to target: {:.1f}%",
                                 100 * std::max((70 - 49.8) / 70, std::abs(topkTta - 100) / 100))),
            std::string::npos)
      << md2;
  // A run without a decision log is a clear error.
  gradzip::testing::TempDir empty;
  EXPECT_THROW(trainer::loadRunProfile(empty.path()), UserError);
}

TEST(Simulate, PredictsOnlyTheSyncThatBackwardDoesNotHide) {
  // Two controlled buckets of 5·10^5 coordinates handed over at 20 and 50 ms,
  // backward ending at 50 ms, 1 ms of the comm thread's own per bucket;
  // fp16@engine with a 2 ms codec (1 ms per bucket), N = 2, α = 1 ms,
  // 100 Mbit/s: each bucket's ring all-reduce of 1 MB takes r.
  gradzip::testing::TempDir dir;
  const double beta = 8.0 / 100e6;
  {
    std::ofstream f(dir.path() + "/decisions.jsonl");
    f << R"({"event":"decision","step":20,"world_size":2,"alpha":0.001,"beta":)" << beta
      << R"(,"base_step":0.06,"buckets":[500000,500000],)"
      << R"("overlap":{"backward_end":0.05,"handover":[0.02,0.05],"overhead":[0.001,0.001],"busy":[0.09,0.09],)"
      << R"("large":[0,1]},"candidates":[)"
      << R"({"plan":"fp16@engine","ok":true,"bits":16,"encode_decode":0.002,"vnmse":1e-8,"gain":1}]})" << "\n";
  }
  const auto p = trainer::loadRunProfile(dir.path());
  ASSERT_EQ(p.overlap.handover.size(), 2u);
  const auto net = comm::NetworkParams{0.001, beta};
  const double r = comm::ringAllReduceCost(1e6, 2, net);
  // Bucket 0 ends at 20 + 1 + 1 + r ms; bucket 1 starts at max(that, 50) and
  // takes as long; backward ends at 50 ms.
  const double first = 0.02 + 0.002 + r;
  const double exposed = std::max(first, 0.05) + 0.002 + r - 0.05;
  EXPECT_NEAR(trainer::predictStep(p, p.candidates[0], 2, net, p.baseStep), 0.06 + exposed, 1e-9);
  // Less than charging both buckets in full, as a log without "overlap" is.
  EXPECT_LT(exposed, 0.002 + 2 * r);
}
