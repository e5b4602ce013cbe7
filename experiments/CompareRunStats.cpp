// Implements readRun (experiments/CompareSummary.h): one run's figures from
// its TTA log, the per-step means and spread of the step breakdown, the time,
// evaluation window and comm-free time to each target, and the vNMSE weighted
// by the steps the trainer measured.
#include "experiments/CompareSummary.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace gradzip::experiments {
namespace {

// Steps s in [from, to) the trainer measured compression on (s % every == 0).
int64_t measuredSteps(int64_t from, int64_t to, int64_t every) {
  if (to <= from) return 0;
  auto upTo = [every](int64_t x) { return x <= 0 ? 0 : (x - 1) / every + 1; };  // multiples of every in [0, x)
  return upTo(to) - upTo(from);
}

}  // namespace

RunStats readRun(const std::string& dir, const std::vector<double>& targets) {
  RunStats r;
  r.timeToTarget.assign(targets.size(), std::nullopt);
  r.commFreeToTarget.assign(targets.size(), std::nullopt);
  r.targetWindowStart.assign(targets.size(), std::nullopt);
  std::ifstream in(dir + "/tta.jsonl");
  std::string line;
  int64_t prevStep = 0, counted = 0;
  double commCost = 0;  // seconds of communication cost in the steps so far
  const int64_t every = std::filesystem::exists(dir + "/decisions.jsonl") ? 1 : kVnmseEvery;
  double vnmseSum = 0;
  double sum[7] = {0, 0, 0, 0, 0, 0, 0};
  double prevSeconds = 0;
  std::vector<std::pair<int64_t, double>> stepRows;  // (steps covered, mean step time) per row
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("breakdown")) continue;
    const auto& m = j["metrics"];
    const double metric = m.contains("accuracy")       ? m["accuracy"].get<double>()
                          : m.contains("mlm_accuracy") ? m["mlm_accuracy"].get<double>()
                                                       : NAN;
    const double t = j["train_seconds"].get<double>();
    const int64_t step = j["step"].get<int64_t>();
    const int64_t n = std::max<int64_t>(0, step - prevStep);  // steps this row's breakdown covers
    if (j.contains("vnmse") && j["vnmse"].is_number()) {
      const int64_t w = measuredSteps(prevStep, step, every);
      vnmseSum += j["vnmse"].get<double>() * static_cast<double>(w);
      r.vnmseSteps += w;
    }
    prevStep = step;
    const auto& b = j["breakdown"];
    const double v[7] = {b.value("step", 0.0),   b.value("compute", 0.0),   b.value("exposed", 0.0),
                         b.value("encode", 0.0), b.value("decode", 0.0),    b.value("data_wait", 0.0),
                         b.value("optimizer", 0.0)};
    for (int k = 0; k < 7; ++k) sum[k] += v[k] * static_cast<double>(n);
    counted += n;
    stepRows.emplace_back(n, v[0]);
    // Encode/decode count in full even where the comm thread overlapped them
    // with backward: on this 2-core machine that thread takes a core from
    // compute, and the bound is meant to be optimistic (a lower bound on time).
    commCost += std::min(v[0], v[2] + v[3] + v[4]) * static_cast<double>(n);
    for (size_t i = 0; i < targets.size(); ++i)
      if (!r.timeToTarget[i] && metric >= targets[i]) {
        r.timeToTarget[i] = t;
        r.targetWindowStart[i] = prevSeconds;
        r.commFreeToTarget[i] = std::max(0.0, t - commCost);
      }
    prevSeconds = t;
    r.finalMetric = metric;
    r.trainSeconds = t;
    r.commFreeSeconds = std::max(0.0, t - commCost);
    r.steps = step;
    r.bytes = j.value("bytes", int64_t{0});
    r.plan = j.value("plan", std::string());
    r.ok = true;
  }
  if (counted > 0) {
    double* out[7] = {&r.step, &r.compute, &r.exposed, &r.encode, &r.decode, &r.dataWait, &r.optimizer};
    for (int k = 0; k < 7; ++k) *out[k] = sum[k] / static_cast<double>(counted);
    double var = 0;
    for (const auto& [n, x] : stepRows) var += static_cast<double>(n) * (x - r.step) * (x - r.step);
    r.stepSd = std::sqrt(var / static_cast<double>(counted));
  }
  if (r.vnmseSteps > 0) r.vnmse = vnmseSum / static_cast<double>(r.vnmseSteps);
  r.ddp = r.plan.rfind("ddp-", 0) == 0;
  if (std::ifstream f(dir + "/failed"); f) std::getline(f, r.failure);
  return r;
}

}  // namespace gradzip::experiments
