// Replays decision logs that the controller wrote before it was split into
// parts (tests/controller/replay/*: the effective config and rank 0's
// decision records of three short `compress: auto` runs at time_weight 0.85,
// 0.3 and 0, with first, network and step-time decisions, a predicted knee
// and a kept plan among them). From each record's logged inputs (the
// explored plans' compared times and statistics, the running plan's point,
// a network decision's predicted knee, the candidates' screened statistics
// as the cost floor) today's decision rule (controller/ControllerOptions.h
// statisticalCost, controller/Pareto.h kneePoint) must choose the plan that
// the old controller chose. The configs were written before three options
// that were never on by default were removed; those keys are dropped.
#include "controller/Candidates.h"
#include "controller/ControllerOptions.h"
#include "controller/Pareto.h"
#include "sync/Plan.h"
#include "trainer/TrainConfig.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using gradzip::trainer::ControllerOptions;
using gradzip::trainer::Objectives;

namespace {

std::string replayDir() {
  const char* src = std::getenv("GRADZIP_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/controller/replay/";
}

double num(const nlohmann::json& j) { return j.is_number() ? j.get<double>() : NAN; }

// The plan rank 0 chose, from the record's inputs alone.
std::string replay(const nlohmann::json& rec, const ControllerOptions& opts) {
  using gradzip::trainer::planFromKey;
  using gradzip::trainer::statisticalCost;
  // Each candidate's screened cost: a few explored steps do not bring a plan below it.
  std::map<std::string, double> floor;
  for (const auto& c : rec["candidates"])
    if (c.value("ok", false))
      floor[c["plan"]] = statisticalCost(opts, planFromKey(c["plan"]), num(c["vnmse"]), num(c["gain"]));
  std::vector<Objectives> pts;
  std::vector<std::string> plans;
  for (const auto& e : rec.value("explored", nlohmann::json::array())) {
    const std::string plan = e["plan"];
    const double f = std::isfinite(floor[plan]) ? floor[plan] : 0.0;
    const double cost = std::max(f, statisticalCost(opts, planFromKey(plan), num(e["vnmse"]), num(e["gain"])));
    pts.push_back(e["ok"].get<bool>() ? Objectives{num(e["time"]), cost} : Objectives{INFINITY, INFINITY});
    plans.push_back(plan);
  }
  // The running plan's point, unless its steps straddle a network change
  // that the decision re-measured (and did not keep it for its prediction).
  const std::string trigger = rec["trigger"];
  const bool network = trigger == "network" || trigger == "step_time" || trigger == "sounding";
  const bool stale = network && !rec.contains("remeasure") && !rec.contains("kept");
  const auto& cur = rec["current"];
  pts.push_back(std::isfinite(num(cur["time"])) && !stale ? Objectives{num(cur["time"]), num(cur["cost"])}
                                                           : Objectives{INFINITY, INFINITY});
  plans.push_back(cur["plan"]);
  if (rec.contains("predicted_knee")) {
    const auto& k = rec["predicted_knee"];
    pts.push_back({num(k["predicted_step"]), num(k["statistical_cost"])});
    plans.push_back(k["plan"]);
  }
  if (gradzip::trainer::paretoFront(pts).empty()) return cur["plan"];
  return plans[opts.kneeOf(pts)];
}

}  // namespace

TEST(DecisionReplay, TodaysRuleChoosesWhatTheLoggedDecisionsChose) {
  int decisions = 0;
  for (const std::string run : {"tw085", "tw03", "tw0"}) {
    const auto cfg = gradzip::trainer::TrainConfig::load(replayDir() + run + "/config.yaml");
    ASSERT_TRUE(cfg.controller) << run;
    std::ifstream in(replayDir() + run + "/decisions.jsonl");
    ASSERT_TRUE(in.good()) << run;
    std::string line;
    while (std::getline(in, line)) {
      const auto rec = nlohmann::json::parse(line);
      if (rec["event"] != "decision") continue;
      ++decisions;
      EXPECT_EQ(replay(rec, *cfg.controller), rec["chosen"].get<std::string>())
          << run << ", decision at step " << rec["step"] << " (" << rec["trigger"] << ")";
    }
  }
  EXPECT_EQ(decisions, 7);  // 2 + 3 + 2 records: none skipped
}
