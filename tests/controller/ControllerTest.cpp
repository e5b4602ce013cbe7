// Tests of the MOO controller (controller/Controller.h) and its parts: the plan
// cost against the paper's Table I / Eq. 4 numbers, the candidate list against
// the compressors' capabilities, `compress: auto` parsing, exploration that
// leaves the training state bit-identical (every part of it compared before
// and after, and a pinned controller must train exactly like the static plan
// it is pinned to, residuals included), every rank running the same plan at
// every step, explored ones included, on real Gloo groups over loopback, and (root
// only, in emulated networks) the moves to a sparse plan when the link slows
// down and, through bandwidth soundings, back to a dense one when it recovers;
// the provisional rewind leaves no state of the undone steps, and a resumed
// run goes on with the plan it checkpointed.
#include "compress/Factory.h"
#include "comm/Collective.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/Process.h"
#include "tests/testing/RoundCounter.h"
#include "tests/testing/ThreadGroup.h"
#include "tests/trainer/TrainerTesting.h"
#include "controller/BandwidthSounding.h"
#include "controller/Candidates.h"
#include "controller/ControllerState.h"
#include "controller/PlanCost.h"
#include "cli/Simulate.h"
#include "trainer/Trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace gradzip;
using trainer::Plan;

namespace {

const char* kFmnist = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

Plan plan(const std::string& key) { return trainer::planFromKey(key); }

std::vector<nlohmann::json> jsonLines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// A run's decision records, and the screened vNMSE of every candidate of
// the last one (each must have screened).
struct Screenings {
  std::vector<nlohmann::json> decisions;
  std::map<std::string, double> vnmse;  // by plan key
};
Screenings screenings(const std::string& runDir) {
  Screenings out;
  for (const auto& r : jsonLines(runDir + "/decisions.jsonl")) {
    if (r["event"] != "decision") continue;
    out.decisions.push_back(r);
    for (const auto& c : r["candidates"]) {
      EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
      out.vnmse[c["plan"].get<std::string>()] = c["vnmse"].get<double>();
    }
  }
  return out;
}

trainer::TrainConfig config(const std::string& outDir, const std::string& compress, int64_t steps,
                            const std::string& optim = "{name: sgd, lr: 0.05, momentum: 0.9}") {
  return gradzip::testing::mlpConfig(outDir, compress,
                                     "train: {max_steps: " + std::to_string(steps) +
                                         ", eval_every: 10, eval_batches: 2}\ncomm: {timeout_s: 30}\n",
                                     optim);
}

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

// One step a rank trained: its step number, the plan its large buckets ran,
// and what undid it ("" for the steps that stay).
struct TrainedStep {
  int64_t step;
  std::string plan, undoneBy;
  bool operator==(const TrainedStep&) const = default;
};
std::ostream& operator<<(std::ostream& os, const TrainedStep& t) {
  return os << "step " << t.step << " " << t.plan << (t.undoneBy.empty() ? "" : " undone by " + t.undoneBy);
}

// The plan in force after each step 0 ... last of the kept path, from
// rankDir/plans.jsonl (controller/Controller.h): a record at step s sets it for
// the steps after s, in file order (a rewind's record comes after records of
// later steps and overrides them).
std::vector<std::string> keptPlans(const std::string& rankDir, int64_t last) {
  std::vector<std::string> plan(size_t(last + 2));
  for (const auto& r : jsonLines(rankDir + "/plans.jsonl"))
    for (int64_t t = r["step"].get<int64_t>() + 1; t <= last + 1; ++t) plan[size_t(t)] = r["plan"];
  return plan;
}

// Every step one rank trained up to step `last`, in the order it trained
// them: the kept path (keptPlans) and, between the kept steps s and s + 1,
// the undone steps rankDir/undone.jsonl records after s.
std::vector<TrainedStep> trainedSteps(const std::string& rankDir, int64_t last) {
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
std::vector<nlohmann::json> expectTheSameStepsOnEveryRank(const std::string& runDir, int64_t last) {
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

TEST(PlanCost, ArTopKMatchesThePapersResNet18Example) {
  // Flexible-communication paper Table VI: N = 8, α = 1 ms, 1 Gbps, ResNet-18
  // (11.68M parameters), CR 0.1: ART-Ring 194.5 ms, ART-Tree 345.4 ms (Eq. 4a/4b);
  // AG-TopK 526.3 ms is TopK's all-gather of 2Mc bytes: gradzip's topk sends
  // fp16 values + int32 indices (48 bits per kept coordinate, not 64), so its
  // cost is checked against Table I's all-gather instead.
  const auto net = comm::NetworkParams::fromLatencyAndGbps(1e-3, 1.0);
  const int64_t d = 11680000;
  auto seconds = [&](const std::string& key, double bits) {
    return trainer::planSeconds(trainer::planCoefficients(plan(key), bits, d, 8), net);
  };
  EXPECT_NEAR(seconds("artopk{cr: 0.1}@ring", 6.4) * 1e3, 194.5, 194.5 * 0.01);
  EXPECT_NEAR(seconds("artopk{cr: 0.1}@tree", 6.4) * 1e3, 345.4, 345.4 * 0.01);
  EXPECT_NEAR(seconds("artopk{cr: 0.1}@engine", 6.4), comm::artRingCost(4.0 * d, 0.1, 8, net), 1e-12);
  // Dense collectives: Table I with M = b·d/8.
  const double m = 16.0 * d / 8;
  EXPECT_NEAR(seconds("fp16@ring", 16), comm::ringAllReduceCost(m, 8, net), 1e-12);
  EXPECT_NEAR(seconds("fp16@tree", 16), comm::treeAllReduceCost(m, 8, net), 1e-12);
  EXPECT_NEAR(seconds("topk{ratio: 0.1}@allgather", 4.8), comm::allGatherCost(4.8 * d / 8, 8, net), 1e-12);
  // TopK's "engine" is c10d's all-gather: the same row, not the all-reduce's
  // (half the bytes at N = 4, a quarter of them at N = 8).
  EXPECT_NEAR(seconds("topk{ratio: 0.1}@engine", 4.8), comm::allGatherCost(4.8 * d / 8, 8, net), 1e-12);
  // The sharded parameter server: N−1 messages each way, 2(N−1)α + 2(N−1)/N·Mβ.
  EXPECT_NEAR(seconds("fp16@ps", 16), 14e-3 + 2.0 * 7 / 8 * m * net.beta, 1e-12);
  // An extra round (THC's norm round) costs one more latency term, no bytes.
  EXPECT_NEAR(seconds("thc{bits: 4}@ring", 4) - comm::ringAllReduceCost(4.0 * d / 8, 8, net), 2 * 7 * 1e-3, 1e-12);
  // VAR-TopK all-gathers one float per rank on top of STAR.
  EXPECT_GT(seconds("artopk{cr: 0.1, mode: var}@ring", 6.4), seconds("artopk{cr: 0.1, mode: star}@ring", 6.4));
  // One rank communicates nothing.
  EXPECT_EQ(trainer::planCoefficients(plan("fp16@ring"), 16, d, 1).betaBytes, 0.0);
  EXPECT_THROW(trainer::planCoefficients(plan("fp16@mesh"), 16, d, 4), UserError);
}

// One aggregation of every default candidate on two real Gloo ranks through
// RoundCounter, counted on rank 0 (the third call: the first ones set state
// up, PowerSGD's Q and THC's tables): per plan key the latency terms and
// bytes it issued, and the cost model's coefficients for it. At two ranks
// every rank's rounds are the critical path.
namespace {
struct Counted {
  double rounds = 0, bytes = 0;
  comm::AlphaBetaSample model;
};
std::map<std::string, Counted> countDefaultCandidates(int64_t d) {
  std::map<std::string, Counted> seen;
  gradzip::testing::runRanks(
      2,
      [&](comm::Communicator& inner) {
        gradzip::testing::RoundCounter c(inner);
        const auto g = at::randn({d}, at::make_generator<at::CPUGeneratorImpl>(c.rank() + 11));
        for (const auto& cand : trainer::makeCandidates({})) {
          const auto& p = cand.plan;
          YamlReader r(p.options, "t", "t");
          auto comp = compress::makeCompressor(p.compressor, r);
          std::unique_ptr<comm::Collective> coll;
          if (p.collective != "engine" && p.collective != "allgather") coll = comm::makeCollective(p.collective, c);
          compress::Context ctx{c, coll.get(), p.collective, {}, 7, 0, 0, nullptr};
          for (int64_t t = 0; t < 3; ++t) {
            if (t == 2) c.reset();
            ctx.step = t;
            comp->aggregate(g, ctx);
          }
          if (c.rank() == 0)
            seen[p.key()] = {c.latencyTerms(), c.bytesSent(),
                             trainer::planCoefficients(p, comp->bitsPerCoordinate(d, 2), d, 2,
                                                       comp->downlinkBitsPerCoordinate(d, 2))};
        }
      },
      std::chrono::seconds(120));
  EXPECT_EQ(seen.size(), trainer::makeCandidates({}).size());
  return seen;
}
}  // namespace

TEST(PlanCost, LatencyTermsAreTheRoundsTheCodeRuns) {
  // Every default candidate's α coefficient against the rounds of latency one
  // aggregation of it issues (RoundCounter: Table I's row for each engine
  // collective, 1 for each round of point-to-point messages): TopKC's norm
  // all-reduce before its chunks, PowerSGD's P before Q, THC's range round,
  // AR-TopK's index broadcast (and VAR's norm all-gather) before the values,
  // TopK's values and indices gathered in one round.
  for (const auto& [key, v] : countDefaultCandidates(1 << 14)) EXPECT_DOUBLE_EQ(v.rounds, v.model.alphaCount) << key;
}

TEST(PlanCost, ByteTermsAreTheBytesTheCodeSends) {
  // Every default candidate's β coefficient (bytes) against the bytes one
  // aggregation of it sends (RoundCounter: a message's bytes, an engine
  // collective its Table I row's). Headers may ride in a round of their own
  // (TopKC's norms, THC's ranges) where the model folds them into the
  // message, so within 2%; d = 2^16, where AR-TopK 0.1% sends 65 values for
  // the model's 65.5. THC's parameter server returns 6-bit sums for 2-bit
  // codes: charged at the uplink's width, its bytes were predicted at half
  // what it sends. Trees are left out: their reduce and broadcast each leave
  // one direction idle, so Table I's 2·log N·M is the critical path's bytes,
  // twice what a rank sends at N = 2.
  for (const auto& [key, v] : countDefaultCandidates(1 << 16))
    if (trainer::planFromKey(key).collective != "tree") {
      EXPECT_NEAR(v.model.betaBytes / v.bytes, 1.0, 0.02)
          << key << ": model " << v.model.betaBytes << " bytes, sent " << v.bytes;
    }
}

TEST(Candidates, EveryCandidateIsAllowedByItsCompressor) {
  const auto cands = trainer::makeCandidates({});
  std::set<std::string> keys;
  std::map<std::string, int> perFamily, perCodec;
  for (const auto& c : cands) {
    EXPECT_TRUE(keys.insert(c.plan.key()).second) << "duplicate " << c.plan.key();
    ++perFamily[c.family];
    YamlReader r(c.plan.options, "t", "t");
    auto comp = compress::makeCompressor(c.plan.compressor, r);
    const auto caps = comp->capabilities();
    EXPECT_NE(std::find(caps.collectives.begin(), caps.collectives.end(), c.plan.collective), caps.collectives.end())
        << c.plan.key();
    EXPECT_EQ(trainer::planFromKey(c.plan.key()).key(), c.plan.key());  // keys round-trip
    EXPECT_EQ(c.plan.codecKey() + "@" + c.plan.collective, c.plan.key());
    ++perCodec[c.plan.codecKey()];
  }
  // A compressor configuration's collectives share one codec key: fewer
  // configurations than plans (THC 4-bit all-reduce runs over ring, ps, ...).
  EXPECT_LT(perCodec.size(), cands.size());
  EXPECT_GE(perCodec.at("thc{deployment: allreduce, bits: 4, rotation_block_log2: 10}"), 2);
  // The all-reduce form at 4 bits alone (ControllerOptions::thcAllReduceBits);
  // the parameter-server form at 2, 4 and 8.
  EXPECT_EQ(perCodec.count("thc{deployment: allreduce, bits: 2, rotation_block_log2: 10}"), 0u);
  EXPECT_EQ(perCodec.count("thc{deployment: ps, bits: 2}"), 1u);
  // The paper's TopK ratios: topk all-gathers (and accepts "engine"); artopk
  // has STAR and VAR over ring, tree, engine and ps.
  EXPECT_EQ(perFamily["topk"], 5 * 2);
  EXPECT_EQ(perFamily["artopk"], 5 * 2 * 4);
  // cnat never runs over a ring (sums of powers of two are not powers of two).
  for (const auto& c : cands)
    if (c.family == "cnat") {
      EXPECT_TRUE(c.plan.collective == "ps" || c.plan.collective == "allgather") << c.plan.key();
    }
}

TEST(Plan, KeyDoesNotDependOnTheConfigsYamlStyle) {
  // Options written as a block and inline are the same plan, with a one-line key.
  const auto block = YAML::Load("name: topkc\ntopkc:\n  bits: 2\n  chunk: 64\n");
  const auto inline_ = YAML::Load("{name: topkc, topkc: {bits: 2, chunk: 64}}");
  const auto a = trainer::Plan::fromYaml(YamlReader(block, "a.yaml", "compress"));
  const auto b = trainer::Plan::fromYaml(YamlReader(inline_, "b.yaml", "compress"));
  EXPECT_EQ(a.key(), "topkc{bits: 2, chunk: 64}@engine");
  EXPECT_EQ(a.key(), b.key());
  EXPECT_TRUE(a == b);
}

TEST(Candidates, CollectiveFilterAndBadFamilies) {
  trainer::ControllerOptions o;
  o.collectives = {"ps"};
  for (const auto& c : trainer::makeCandidates(o)) EXPECT_EQ(c.plan.collective, "ps");
  o.families = {"topk"};  // all-gather only: nothing is left over ps
  EXPECT_THROW(trainer::makeCandidates(o), UserError);
  EXPECT_THROW(trainer::planFromKey("fp16"), UserError);

  auto parse = [](const std::string& compress) {
    auto r = YamlReader::loadString("model: {name: mlp}\ndata: {dataset: fashion_mnist}\ncompress: " + compress + "\n",
                                    "c.yaml");
    return trainer::TrainConfig::fromYaml(r);
  };
  auto cfg = parse("auto");
  ASSERT_TRUE(cfg.controller);
  EXPECT_EQ(cfg.plan.key(), "fp16@engine");
  EXPECT_EQ(cfg.controller->networkInterval, 30);
  EXPECT_EQ(cfg.controller->minInterval, 200);
  EXPECT_DOUBLE_EQ(cfg.controller->timeWeight, 0.85);
  EXPECT_DOUBLE_EQ(cfg.controller->exploreMargin, 0.05);
  EXPECT_DOUBLE_EQ(cfg.controller->timeTolerance, 0.04);
  EXPECT_EQ(cfg.controller->stat, "ef_rate");  // SGD's default (ControllerOptions::defaultStat)
  EXPECT_DOUBLE_EQ(cfg.controller->efRateScale, 0.03);
  EXPECT_EQ(cfg.controller->geometry, "optimizer");
  EXPECT_EQ(cfg.controller->gainScope, "family");
  EXPECT_EQ(cfg.controller->exploreMinSteps, 2);
  EXPECT_TRUE(cfg.controller->provisionalRewind);
  EXPECT_FALSE(parse("{name: auto, provisional_rewind: false}").controller->provisionalRewind);
  EXPECT_DOUBLE_EQ(cfg.controller->sparseStartAbove, 0.1);
  EXPECT_EQ(cfg.controller->sparseStartPlan.key(), "topk{ratio: 0.001}@allgather");
  EXPECT_EQ(parse("{name: auto, sparse_start_above: 0, sparse_start_plan: {name: topkc, topkc: {bits: 0.5}}}")
                .controller->sparseStartPlan.key(),
            "topkc{bits: 0.5}@engine");
  cfg = parse("{name: auto, time_weight: 0.8, network_interval: 15, stat: ef, explore_margin: 0, gain_scope: all,"
              " explore_min_steps: 0, time_tolerance: 0, pin: {name: thc, collective: ps}}");
  EXPECT_EQ(cfg.controller->exploreMinSteps, 0);
  EXPECT_DOUBLE_EQ(cfg.controller->timeTolerance, 0.0);
  ASSERT_TRUE(cfg.controller);
  EXPECT_EQ(cfg.controller->networkInterval, 15);
  EXPECT_EQ(cfg.controller->stat, "ef");
  EXPECT_EQ(cfg.controller->gainScope, "all");
  EXPECT_TRUE(cfg.controller->commonBase);
  EXPECT_FALSE(parse("{name: auto, common_base: false}").controller->commonBase);
  EXPECT_DOUBLE_EQ(cfg.controller->exploreMargin, 0.0);
  ASSERT_TRUE(cfg.controller && cfg.controller->pin);
  EXPECT_EQ(cfg.plan.compressor, "thc");
  EXPECT_DOUBLE_EQ(cfg.controller->timeWeight, 0.8);
  // Under AdamW the default is vnmse (no error-feedback bound there), in
  // both spellings of `auto`; an explicit stat wins.
  auto parseWith = [](const std::string& optim, const std::string& compress) {
    auto r = YamlReader::loadString("model: {name: mlp}\ndata: {dataset: fashion_mnist}\noptim: " + optim +
                                        "\ncompress: " + compress + "\n",
                                    "c.yaml");
    return trainer::TrainConfig::fromYaml(r);
  };
  EXPECT_EQ(parseWith("{name: adamw, lr: 0.001}", "auto").controller->stat, "vnmse");
  EXPECT_EQ(parseWith("{name: adamw, lr: 0.001}", "{name: auto, time_weight: 0.9}").controller->stat, "vnmse");
  EXPECT_EQ(parseWith("{name: adamw, lr: 0.001}", "{name: auto, stat: ef_rate, ef_rate_scale: 0.02}").controller->stat,
            "ef_rate");
  EXPECT_DOUBLE_EQ(parseWith("{name: sgd}", "{name: auto, ef_rate_scale: 0.02}").controller->efRateScale, 0.02);
  EXPECT_EQ(cfg.controller->screenReps, 8);
  EXPECT_EQ(parse("{name: auto, screen_reps: 2}").controller->screenReps, 2);
  // The options tried and not adopted are unknown keys now (their
  // measurements stay in experiments/results/controller_ablation.md).
  for (const char* gone : {"screen_window: 8", "rescreen_first: true", "recheck_steps: 20"})
    EXPECT_THROW(parse(std::string("{name: auto, ") + gone + "}"), ConfigError) << gone;
  // The knee's scale is Relative by default, as controller/Pareto.h says.
  EXPECT_EQ(cfg.controller->kneeScale(), trainer::KneeScale::Relative);
  // thc_allreduce_bits sets the all-reduce form's grid apart from thc_bits.
  const auto arKey = [](int bits) {
    return fmt::format("thc{{deployment: allreduce, bits: {}, rotation_block_log2: 10}}", bits);
  };
  auto codecs = [](const trainer::ControllerOptions& o) {
    std::set<std::string> keys;
    for (const auto& c : trainer::makeCandidates(o)) keys.insert(c.plan.codecKey());
    return keys;
  };
  EXPECT_EQ(codecs(*cfg.controller).count(arKey(2)), 0u);
  const auto both = codecs(*parse("{name: auto, thc_allreduce_bits: [2, 4], thc_bits: [4]}").controller);
  EXPECT_EQ(both.count(arKey(2)), 1u);
  EXPECT_EQ(both.count(arKey(4)), 1u);
  EXPECT_EQ(both.count("thc{deployment: ps, bits: 2}"), 0u);
  // The effective config round-trips through YAML.
  YAML::Emitter e;
  e << cfg.toYaml();
  auto again = YamlReader::loadString(e.c_str(), "effective.yaml");
  EXPECT_EQ(trainer::TrainConfig::fromYaml(again).fingerprint(), cfg.fingerprint());
  auto expectError = [&](const std::string& compress, const std::string& what) {
    try {
      parse(compress);
      ADD_FAILURE() << "accepted " << compress;
    } catch (const ConfigError& err) {
      EXPECT_NE(std::string(err.what()).find(what), std::string::npos) << err.what();
    }
  };
  expectError("{name: auto, families: [fp16, zip]}", "c.yaml:3: compress.families: unknown compressor family 'zip'");
  expectError("{name: auto, time_weight: 2}", "compress.time_weight");
  expectError("{name: auto, time_tolerance: -0.1}", "compress.time_tolerance");
  expectError("{name: auto, network_interval: 0}", "compress.network_interval");
  expectError("{name: auto, stat: mse}", "compress.stat");
  expectError("{name: auto, knee: l2}", "compress.knee");
  EXPECT_EQ(parse("{name: auto, knee: log, time_weight: 0.5}").controller->kneeScale(), trainer::KneeScale::Log);
  expectError("{name: auto, geometry: adam}", "compress.geometry");
  expectError("{name: auto, ef_rate_scale: 2}", "compress.ef_rate_scale");
  expectError("{name: auto, screen_reps: 1}", "compress.screen_reps");
  expectError("{name: auto, screen_threads: 0}", "compress.screen_threads");
  expectError("{name: auto, thc_allreduce_bits: [1]}", "compress.thc_allreduce_bits");
  expectError("{name: auto, thc_bits: [9]}", "compress.thc_bits");
  // stat: gain next to an unbiased quantiser (the default families hold THC
  // and C_nat) is refused, naming them; among sparsifiers alone it stands.
  expectError("{name: auto, stat: gain}", "compress.stat: stat: gain rates an unbiased quantiser (thc, cnat)");
  expectError("{name: auto, stat: gain, families: [fp16, qsgd]}", "defined for sparsifiers only");
  EXPECT_EQ(parse("{name: auto, stat: gain, families: [fp32, fp16, topk, topkc]}").controller->stat, "gain");
  expectError("{name: auto, gain_scope: everything}", "compress.gain_scope");
  expectError("{name: auto, common_base: median}", "compress.common_base");
  expectError("{name: auto, explore_margin: -0.1}", "compress.explore_margin");
  expectError("{name: auto, explore_min_steps: -1}", "compress.explore_min_steps");
  expectError("{name: auto, sound_every: -1}", "compress.sound_every");
  expectError("{name: auto, sound_share: 2}", "compress.sound_share");
  expectError("{name: auto, sound_share: 0}", "compress.sound_share");  // would never sound again
  expectError("{name: auto, noise_every: -5}", "compress.noise_every");
  expectError("{name: auto, provisional_rewind: 3}", "compress.provisional_rewind");
  expectError("{name: auto, sparse_start_above: -1}", "compress.sparse_start_above");
  expectError("{name: auto, sparse_start_plan: {name: zip}}", "zip");
  expectError("{name: auto, explore_step: 3}", "compress.explore_step: unknown key");
  expectError("{name: auto, pin: {name: cnat, collective: ring}}", "does not support collective 'ring'");
  expectError("autom", "expected a mapping");
}

class ControllerTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kFmnist)) GTEST_SKIP() << "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)";
  }
  // Trains `cfg` on two thread ranks over Gloo (resuming from its checkpoints).
  static void train(const trainer::TrainConfig& cfg, bool resume = false) {
    gradzip::testing::runRanks(
        2, [&](comm::Communicator& c) { trainer::Trainer(cfg, c).run(resume); }, std::chrono::seconds(60));
  }
  // 40 steps under `compress` uninterrupted (dir/full) and killed before its
  // step-40 checkpoint (dir/part: that checkpoint deleted on both ranks, as
  // if the kill had come before it was written), then resumed from step 30.
  std::pair<trainer::TrainConfig, trainer::TrainConfig> uninterruptedAndResumedAt30(const std::string& compress) {
    auto full = config(dir.path() + "/full", compress, 40);
    train(full);
    auto part = config(dir.path() + "/part", compress, 40);
    train(part);
    for (int r = 0; r < 2; ++r)
      for (const char* f : {"/checkpoint.pt", "/checkpoint.pt.sum"})
        EXPECT_TRUE(fs::remove(part.runDir() + "/rank" + std::to_string(r) + f));
    train(part, true);
    return {full, part};
  }
  // Rank 0's newest controller state (controller/ControllerState.h).
  static trainer::ControllerState controllerState(const std::string& runDir) {
    torch::serialize::InputArchive ar;
    ar.load_from(runDir + "/rank0/checkpoint.pt");
    return trainer::ControllerState::load(ar);
  }
  gradzip::testing::TempDir dir;
};

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

TEST_F(ControllerTrainTest, ScreeningOnMoreThreadsAndDuringTheSoundingsReadsTheSame) {
  // The same deterministic sparse start three times, screening on 1, 2 and
  // 3 threads (screen_threads). With 2 or more, rank 0 starts the screening
  // on a thread of its own before the sparse start's soundings at step 2
  // (the record says how many codecs it finished while they ran); with 1 it
  // screens after them. Each codec runs whole on one thread, on the same
  // gradient: every candidate's screened vNMSE, gain and wire bits must be
  // the same bit for bit, over codecs with error feedback (TopK, TopKC,
  // PowerSGD), with shared-seed rotations (THC), and with tables (CNat).
  std::map<int64_t, nlohmann::json> provisional;  // per screen_threads
  for (const int64_t threads : {1, 2, 3}) {
    const auto cfg = config(dir.path() + "/t" + std::to_string(threads),
                            "{name: auto, families: [fp16, topk, topkc, thc, powersgd, cnat, artopk], ratios: [0.01],"
                            " topkc_bits: [2, 8], thc_bits: [4], powersgd_ranks: [2], warmup_steps: 10,"
                            " sparse_start_above: 0, probe: {budget_seconds: 0.5}, screen_threads: " +
                                std::to_string(threads) + "}",
                            4);
    train(cfg);
    for (const auto& r : jsonLines(cfg.runDir() + "/decisions.jsonl"))
      if (r["event"] == "provisional") provisional[threads] = r;
    const auto& p = provisional[threads];
    ASSERT_FALSE(p.is_null()) << threads;
    EXPECT_EQ(p["screen_threads"], threads);
    EXPECT_GE(p["codecs_screened"].get<int64_t>(), 10);
    // The screening started before the soundings exactly when there are
    // threads to spare; none of it is left to do after them but what it had
    // not finished.
    EXPECT_EQ(p.contains("screened_during_beta"), threads >= 2) << p.dump();
    if (threads >= 2) {
      EXPECT_LE(p["screened_during_beta"].get<int64_t>(), p["codecs_screened"].get<int64_t>());
    }
  }
  const auto& one = provisional[1]["candidates"];
  for (const int64_t threads : {2, 3}) {
    const auto& other = provisional[threads]["candidates"];
    ASSERT_EQ(other.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      SCOPED_TRACE(one[i]["plan"].get<std::string>() + " on " + std::to_string(threads) + " threads");
      ASSERT_EQ(other[i]["plan"], one[i]["plan"]);
      ASSERT_TRUE(one[i]["ok"].get<bool>());
      ASSERT_TRUE(other[i]["ok"].get<bool>());
      EXPECT_EQ(other[i]["vnmse"].get<double>(), one[i]["vnmse"].get<double>());
      EXPECT_EQ(other[i]["gain"].get<double>(), one[i]["gain"].get<double>());
      EXPECT_EQ(other[i]["bits"].get<double>(), one[i]["bits"].get<double>());
    }
  }
}

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

TEST_F(ControllerTrainTest, ModelsTheWireBytesOfShapeAwareCodecs) {
  // PowerSGD's wire size depends on the bucket's matrices (rank 1 of the
  // MLP's 784x64 and 64x10 weights plus its dense biases: ~1.4 bits a
  // coordinate); without the layout it counts every coordinate dense (32).
  // The plan the controller runs (pinned here) must be modelled with the
  // bits its screening measured, or the network detector compares its
  // collectives with a prediction 20x too slow.
  const std::string psgd = "{name: powersgd, collective: engine, powersgd: {rank: 1}}";
  auto cfg = config(dir.path(), "{name: auto, pin: " + psgd + ", families: [fp16, powersgd], powersgd_ranks: [1],"
                                " warmup_steps: 5,"
                                " check_every: 5, min_interval: 100, explore: 1, explore_steps: 2}",
                    6);
  train(cfg);
  const auto plans = jsonLines(cfg.runDir() + "/rank0/plans.jsonl");
  ASSERT_GE(plans.size(), 1u);
  const std::string key = plans[0]["plan"];
  EXPECT_EQ(key.rfind("powersgd", 0), 0u) << key;
  double screened = NAN;
  for (const auto& r : jsonLines(cfg.runDir() + "/decisions.jsonl"))
    if (r["event"] == "decision")
      for (const auto& c : r["candidates"])
        if (c["plan"] == key) screened = c["bits"];
  ASSERT_TRUE(std::isfinite(screened)) << "no decision screened " << key;
  EXPECT_LT(screened, 4.0);
  EXPECT_DOUBLE_EQ(plans[0]["bits"].get<double>(), screened);
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

TEST_F(ControllerTrainTest, ScreeningReplaysErrorFeedbackCodecsToTheirSteadyState) {
  // The same deterministic run twice up to its first decision (fp16 until
  // then: no provisional plan), screening with 8 and with 2 replays of the
  // step-10 gradient. Two large buckets of different sizes (the MLP's
  // 784x64 weight, then its other tensors: small_bucket_kb 1): every
  // error-feedback candidate must screen on both, with a fresh residual per
  // bucket. TopK's replays feed it its residual, which fills in the
  // coordinates it dropped: its vNMSE on the 8th replay must exceed that on
  // the 2nd (ResNet-20: 0.90 against 0.76 at 1.1%). fp16 has no residual:
  // the same statistics either way. A configuration's collectives share its
  // screening: TopK over all-gather and over the engine, identical vNMSE.
  std::map<int64_t, std::map<std::string, double>> vnmse;  // per screen_reps, per plan
  for (const int64_t reps : {8, 2}) {
    const auto cfg = gradzip::testing::mlpConfig(
        dir.path() + "/" + std::to_string(reps),
        "{name: auto, families: [fp16, topk], ratios: [0.01, 0.001], warmup_steps: 10, provisional_step: 0,"
        " explore: 1, explore_steps: 2, small_bucket_kb: 1, screen_reps: " + std::to_string(reps) +
            ", probe: {budget_seconds: 0.5}}",
        "train: {max_steps: 10, eval_every: 10, eval_batches: 2}\ncomm: {timeout_s: 30, bucket_mb: 0.1}\n");
    train(cfg);
    const auto s = screenings(cfg.runDir());
    ASSERT_EQ(s.decisions.size(), 1u);
    const auto& r = s.decisions[0];
    ASSERT_EQ(r["buckets"].size(), 2u) << r["buckets"].dump();
    EXPECT_NE(r["buckets"][0], r["buckets"][1]);
    EXPECT_EQ(r["screen_reps"], reps);
    vnmse[reps] = s.vnmse;
    for (const std::string ratio : {"0.01", "0.001"}) {
      const std::string topk = "topk{ratio: " + ratio + "}@";
      EXPECT_EQ(vnmse[reps].at(topk + "allgather"), vnmse[reps].at(topk + "engine"));
    }
  }
  for (const std::string ratio : {"0.01", "0.001"}) {
    const std::string key = "topk{ratio: " + ratio + "}@allgather";
    std::cout << key << " screened vNMSE: " << vnmse[2].at(key) << " (2 replays), " << vnmse[8].at(key) << " (8)\n";
    EXPECT_GT(vnmse[8].at(key), vnmse[2].at(key)) << key;  // here 0.87 against 0.79 at 1%, 0.966 against 0.958 at 0.1%
  }
  EXPECT_EQ(vnmse[8].at("fp16@engine"), vnmse[2].at("fp16@engine"));
}

TEST_F(ControllerTrainTest, MeasuresAdamsStatisticsInItsUpdateGeometry) {
  // The same AdamW run twice up to its first decision (deterministic, so the
  // screened gradient is the same), once measuring in the update's geometry
  // and once in the gradient's. TopK 1% keeps the largest gradient entries,
  // of the tensors whose Adam factor 1/(√mean v̂+ε) is the smallest (the MLP's
  // output layer): in the update's geometry it must lose more than in the
  // gradient's. fp16 loses ~2⁻²² in both.
  std::map<std::string, std::map<std::string, double>> vnmse;
  for (const std::string geometry : {"optimizer", "gradient"}) {
    auto cfg = config(dir.path() + "/" + geometry,
                      "{name: auto, families: [fp16, topk], ratios: [0.01], warmup_steps: 10, explore: 1,"
                      " explore_steps: 2, geometry: " + geometry + ", probe: {budget_seconds: 0.5}}",
                      10, "{name: adamw, lr: 0.001}");
    train(cfg);
    int decisions = 0;
    for (const auto& r : jsonLines(cfg.runDir() + "/decisions.jsonl")) {
      if (r["event"] != "decision") continue;
      ++decisions;
      EXPECT_EQ(r["geometry"], geometry);
      for (const auto& c : r["candidates"])
        if (c["ok"].get<bool>()) vnmse[geometry][c["plan"].get<std::string>()] = c["vnmse"].get<double>();
    }
    EXPECT_EQ(decisions, 1);
  }
  const std::string topk = "topk{ratio: 0.01}@allgather";
  for (const std::string g : {"optimizer", "gradient"})
    ASSERT_TRUE(vnmse[g].count(topk) && vnmse[g].count("fp16@engine")) << g;
  EXPECT_GT(vnmse["optimizer"][topk], vnmse["gradient"][topk]);
  EXPECT_LT(vnmse["optimizer"]["fp16@engine"], 1e-5);
  EXPECT_LT(vnmse["gradient"]["fp16@engine"], 1e-5);
}

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
