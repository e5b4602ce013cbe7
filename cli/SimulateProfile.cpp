// Reads a `compress: auto` run for `gradzip simulate` (cli/Simulate.h
// loadRunProfile): from its decision log the probed network, base step,
// buckets, overlap inputs, every candidate's last screening, the noise
// records and the follow-ups; from config.yaml the knee's options and the
// targets; from tta.jsonl the first evaluation reaching each target with the
// training time beyond its steps.
#include "cli/Simulate.h"

#include "controller/Candidates.h"
#include "controller/PlanCost.h"
#include "trainer/TrainConfig.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

namespace gradzip::trainer {
namespace {

std::vector<nlohmann::json> readJsonLines(const std::string& path) {
  std::ifstream in(path);
  GZ_CHECK(in.good(), "cannot read {}", path);
  std::vector<nlohmann::json> out;
  int line = 0;
  for (std::string text; std::getline(in, text);) {
    ++line;
    if (text.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(text));
    } catch (const nlohmann::json::exception& e) {
      throw UserError(fmt::format("{}:{}: not a JSON line ({})", path, line, e.what()));
    }
  }
  return out;
}

// A decision record's "overlap" (Controller::screenAll). A record written
// before it has none: every controlled bucket, no timings (nothing overlaps).
OverlapInputs overlapOf(const nlohmann::json& decision) {
  OverlapInputs in;
  if (!decision.contains("overlap")) {
    in.large.resize(decision.at("buckets").size());
    std::iota(in.large.begin(), in.large.end(), 0);
    return in;
  }
  const auto& o = decision["overlap"];
  in.handover = o.at("handover").get<std::vector<double>>();
  in.overhead = o.at("overhead").get<std::vector<double>>();
  in.busy = o.at("busy").get<std::vector<double>>();
  in.large = o.at("large").get<std::vector<int>>();
  in.backwardEnd = o.at("backward_end").get<double>();
  return in;
}

}  // namespace

RunProfile loadRunProfile(const std::string& dir, const std::vector<double>& targets) {
  RunProfile p;
  p.dir = dir;
  const std::string log = dir + "/decisions.jsonl";
  GZ_CHECK(std::filesystem::exists(log),
           "{}: no decisions.jsonl; simulate reads the decision log of a run trained with `compress: auto`", dir);
  const auto records = readJsonLines(log);
  const nlohmann::json* last = nullptr;
  for (const auto& r : records) {
    if (r.value("event", "") == "start") p.worldSize = r.at("world_size").get<int>();
    if (r.value("event", "") == "decision") last = &r;
    // A measurement whose estimates were not finite is logged with nulls: skipped.
    if (r.value("event", "") == "noise" && r.value("batch", int64_t(0)) > 0 && r.contains("grad_sq") &&
        r.contains("trace") && r["grad_sq"].is_number() && r["trace"].is_number()) {
      p.batch = r["batch"].get<int64_t>();
      p.noise.push_back({r.value("step", int64_t(0)), {r["grad_sq"].get<double>(), r["trace"].get<double>()}});
    }
  }
  GZ_CHECK(last, "{}: the run took no decision (it ended before the controller's warm-up?)", log);
  for (const auto& r : records) {
    if (r.value("event", "") != "followup") continue;
    // The decision it follows up: its network and compute time.
    for (const auto& d : records) {
      if (d.value("event", "") != "decision" || d["step"] != r["decision_step"]) continue;
      p.followups.push_back({planFromKey(r.at("plan").get<std::string>()), r.at("decision_step").get<int64_t>(),
                             r.at("measured_step").get<double>(),
                             d.at("base_step").get<double>(), r.value("measured_base", double(NAN)),
                             r.value("measured_exposed", double(NAN)),
                             comm::NetworkParams{d.at("alpha").get<double>(), d.at("beta").get<double>()},
                             overlapOf(d)});
    }
  }
  std::vector<double> gains;  // parallel to p.candidates
  try {
    p.worldSize = last->at("world_size").get<int>();
    p.net = {last->at("alpha").get<double>(), last->at("beta").get<double>()};
    p.baseStep = last->at("base_step").get<double>();
    p.buckets = last->at("buckets").get<std::vector<int64_t>>();
    p.overlap = overlapOf(*last);
    // Each candidate as the latest decision that screened it saw it: a gain
    // decision under gain_scope: family screens the running compressor's
    // candidates alone and logs the others "screened": false. In the order
    // of the last decision's list.
    std::map<std::string, const nlohmann::json*> latest;
    for (const auto& r : records) {
      if (r.value("event", "") != "decision" || !r.contains("candidates")) continue;
      for (const auto& c : r["candidates"])
        if (c.value("screened", true)) latest[c.at("plan").get<std::string>()] = &c;
    }
    for (const auto& entry : last->at("candidates")) {
      const auto it = latest.find(entry.at("plan").get<std::string>());
      if (it == latest.end()) continue;
      const auto& c = *it->second;
      if (!c.at("ok").get<bool>() || !c.at("vnmse").is_number()) continue;  // failed screening, or NaN statistics
      p.candidates.push_back({planFromKey(c.at("plan").get<std::string>()), c.at("encode_decode").get<double>(),
                              c["vnmse"].get<double>(), c.at("bits").get<double>()});
      gains.push_back(c.at("gain").is_number() ? c["gain"].get<double>() : 0.0);
    }
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: a decision record lacks a field ({})", log, e.what()));
  }
  const std::string cfgPath = dir + "/config.yaml";
  std::vector<double> wanted = targets;
  if (std::filesystem::exists(cfgPath)) {
    const auto cfg = TrainConfig::load(cfgPath);
    if (cfg.controller) {
      p.controller = *cfg.controller;
      for (size_t i = 0; i < p.candidates.size(); ++i)  // the run's statistical cost (vNMSE as loaded)
        p.candidates[i].stat = statisticalCost(*cfg.controller, p.candidates[i].plan, p.candidates[i].stat, gains[i]);
    }
    if (wanted.empty()) wanted = cfg.train.targets;
  }
  const std::string tta = dir + "/tta.jsonl";
  if (!wanted.empty() && std::filesystem::exists(tta)) {
    try {
      int64_t lastStep = 0;
      double stepSeconds = 0;  // Σ mean step x steps over the rows so far
      bool breakdown = true;
      for (const auto& row : readJsonLines(tta)) {
        const int64_t step = row.at("step").get<int64_t>();
        if (breakdown && row.contains("breakdown") && row["breakdown"].contains("step"))
          stepSeconds += double(step - lastStep) * row["breakdown"]["step"].get<double>();
        else
          breakdown = false;
        lastStep = step;
        const auto& m = row.at("metrics");
        const char* key = m.contains("accuracy") ? "accuracy" : m.contains("mlm_accuracy") ? "mlm_accuracy" : nullptr;
        if (!key) continue;
        const double seconds = row.at("train_seconds").get<double>();
        for (double t : wanted)
          if (!p.reached.count(t) && m[key].get<double>() >= t)
            p.reached[t] = {step, seconds, breakdown ? std::max(0.0, seconds - stepSeconds) : 0.0};
      }
    } catch (const nlohmann::json::exception& e) {
      throw UserError(fmt::format("{}: a row lacks a field ({})", tta, e.what()));
    }
  }
  GZ_CHECK(!p.candidates.empty(), "{}: the last decision has no screened candidate", log);
  return p;
}

double RunProfile::noiseScale(int64_t step) const {
  GradientNoise n;
  for (const auto& [s, e] : noise)
    if (s <= step) n.add(e);
  return n.bSimple();
}

double RunProfile::stepsAt(int64_t steps, double globalBatch) const {
  return stepsAtBatch(double(steps), double(worldSize) * double(batch), globalBatch, noiseScale(steps));
}

}  // namespace gradzip::trainer
