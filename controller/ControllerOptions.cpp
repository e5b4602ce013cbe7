// Implements controller/ControllerOptions.h: strict parsing with file:line errors,
// and the statistical costs.
#include "controller/ControllerOptions.h"

#include "compress/Factory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gradzip::trainer {

Plan defaultSparseStartPlan() {
  Plan p;
  p.compressor = "topk";
  p.options["ratio"] = 0.001;
  p.collective = "allgather";
  return p;
}

std::string ControllerOptions::defaultStat(const std::string& optimizer) {
  return optimizer == "sgd" ? "ef_rate" : "vnmse";
}

ControllerOptions ControllerOptions::fromYaml(YamlReader& r, const std::string& optimizer) {
  ControllerOptions o;
  const auto known = compress::compressorNames();
  o.families = r.getStringList("families", o.families);
  if (o.families.empty()) r.fail("families", "needs at least one compressor family");
  for (const auto& f : o.families)
    if (std::find(known.begin(), known.end(), f) == known.end())
      r.fail("families", fmt::format("unknown compressor family '{}' (known: {})", f, fmt::join(known, ", ")));
  o.collectives = r.getStringList("collectives", o.collectives);
  for (const auto& c : o.collectives)
    if (c != "engine" && c != "ring" && c != "tree" && c != "ps" && c != "allgather")
      r.fail("collectives", fmt::format("unknown collective '{}' (engine, ring, tree, ps, allgather)", c));
  o.ratios = r.getDoubleList("ratios", o.ratios);
  for (double c : o.ratios)
    if (!(c > 0 && c <= 1)) r.fail("ratios", fmt::format("compression ratios must be in (0, 1], got {}", c));
  o.topkcBits = r.getDoubleList("topkc_bits", o.topkcBits);
  for (double b : o.topkcBits)
    if (!(b > 0 && b < 32)) r.fail("topkc_bits", fmt::format("bits per coordinate must be in (0, 32), got {}", b));
  o.thcBits = r.getIntList("thc_bits", o.thcBits);
  for (auto b : o.thcBits)
    if (b < 1 || b > 8) r.fail("thc_bits", fmt::format("THC bits must be in [1, 8], got {}", b));
  o.thcAllReduceBits = r.getIntList("thc_allreduce_bits", o.thcAllReduceBits);
  for (auto b : o.thcAllReduceBits)
    if (b < 2 || b > 8)
      r.fail("thc_allreduce_bits", fmt::format("THC all-reduce bits must be in [2, 8] (signed codes), got {}", b));
  o.powersgdRanks = r.getIntList("powersgd_ranks", o.powersgdRanks);
  for (auto k : o.powersgdRanks)
    if (k < 1) r.fail("powersgd_ranks", fmt::format("ranks must be >= 1, got {}", k));
  o.timeWeight = r.getDouble("time_weight", o.timeWeight, 0.0, 1.0);
  o.knee = r.getEnum("knee", o.knee, {"relative", "minmax", "log"});
  o.timeTolerance = r.getDouble("time_tolerance", o.timeTolerance, 0.0, 1.0);
  o.stat = r.getEnum("stat", defaultStat(optimizer), {"ef_rate", "vnmse", "gain", "ef"});
  if (o.stat == "gain") {
    // gain = ||C(x)||²/||x||² is 1 + vNMSE for an unbiased quantiser, so 1/gain
    // would rate it better than fp32: gain is defined for sparsifiers only.
    // The stochastic quantisers: unbiased (THC within its range, Alg. 3 SQ).
    static const std::vector<std::string> kQuantisers = {"thc", "cnat", "dnat", "qsgd"};
    std::vector<std::string> unbiased;
    for (const auto& f : o.families)
      if (std::find(kQuantisers.begin(), kQuantisers.end(), f) != kQuantisers.end()) unbiased.push_back(f);
    if (!unbiased.empty())
      r.fail("stat", fmt::format("stat: gain rates an unbiased quantiser ({}) better than fp32 (its gain is "
                                 "1 + vNMSE); it is defined for sparsifiers only: drop {} from families, or use "
                                 "stat: ef_rate, vnmse or ef",
                                 fmt::join(unbiased, ", "), unbiased.size() == 1 ? "it" : "them"));
  }
  o.efRateScale = r.getDouble("ef_rate_scale", o.efRateScale, 0.0, 1.0);
  o.geometry = r.getEnum("geometry", o.geometry, {"optimizer", "gradient"});
  o.screenReps = r.getInt("screen_reps", o.screenReps, 2, 1000);
  o.screenThreads = r.getInt("screen_threads", o.screenThreads, 1, 64);
  o.warmupSteps = r.getInt("warmup_steps", o.warmupSteps, 1);
  o.provisionalStep = r.getInt("provisional_step", o.provisionalStep, 0);
  o.provisionalRewind = r.getBool("provisional_rewind", o.provisionalRewind);
  o.sparseStartAbove = r.getDouble("sparse_start_above", o.sparseStartAbove, 0.0, 1e300);
  if (r.has("sparse_start_plan")) o.sparseStartPlan = Plan::fromYaml(r.child("sparse_start_plan"));
  o.exploreSteps = r.getInt("explore_steps", o.exploreSteps, 2, 10000);
  o.exploreMinSteps = r.getInt("explore_min_steps", o.exploreMinSteps, 0, 10000);
  o.explore = r.getInt("explore", o.explore, 1, 64);
  o.exploreMargin = r.getDouble("explore_margin", o.exploreMargin, 0.0, 10.0);
  o.checkEvery = r.getInt("check_every", o.checkEvery, 1);
  o.minInterval = r.getInt("min_interval", o.minInterval, 1);
  o.networkInterval = r.getInt("network_interval", o.networkInterval, 1);
  o.gainDrift = r.getDouble("gain_drift", o.gainDrift, 0.001, 10.0);
  o.gainScope = r.getEnum("gain_scope", o.gainScope, {"family", "all"});
  o.commonBase = r.getBool("common_base", o.commonBase);
  o.networkDrift = r.getDouble("network_drift", o.networkDrift, 0.001, 100.0);
  o.soundEvery = r.getInt("sound_every", o.soundEvery, 0);
  o.soundShare = r.getDouble("sound_share", o.soundShare, 1e-4, 1.0);
  o.noiseEvery = r.getInt("noise_every", o.noiseEvery, 0);
  o.followupSteps = r.getInt("followup_steps", o.followupSteps, 1);
  o.smallBucketKb = r.getInt("small_bucket_kb", o.smallBucketKb, 0);
  if (r.has("small_plan")) o.smallPlan = Plan::fromYaml(r.child("small_plan"));
  if (r.has("initial")) o.initial = Plan::fromYaml(r.child("initial"));
  if (r.has("pin")) o.pin = Plan::fromYaml(r.child("pin"));
  if (r.has("probe")) {
    auto p = r.child("probe");
    o.probe = comm::ProbeOptions::fromYaml(p);
  }
  r.finish();
  return o;
}

YAML::Node ControllerOptions::toYaml() const {
  YAML::Node n;
  n["name"] = "auto";
  n["families"] = families;
  n["collectives"] = collectives;
  n["ratios"] = ratios;
  n["topkc_bits"] = topkcBits;
  n["thc_bits"] = thcBits;
  n["thc_allreduce_bits"] = thcAllReduceBits;
  n["powersgd_ranks"] = powersgdRanks;
  n["time_weight"] = timeWeight;
  n["knee"] = knee;
  n["time_tolerance"] = timeTolerance;
  n["stat"] = stat;
  n["ef_rate_scale"] = efRateScale;
  n["geometry"] = geometry;
  n["screen_reps"] = screenReps;
  n["screen_threads"] = screenThreads;
  n["warmup_steps"] = warmupSteps;
  n["provisional_step"] = provisionalStep;
  n["provisional_rewind"] = provisionalRewind;
  n["sparse_start_above"] = sparseStartAbove;
  n["sparse_start_plan"] = sparseStartPlan.toYaml();
  n["explore_steps"] = exploreSteps;
  n["explore_min_steps"] = exploreMinSteps;
  n["explore"] = explore;
  n["explore_margin"] = exploreMargin;
  n["check_every"] = checkEvery;
  n["min_interval"] = minInterval;
  n["network_interval"] = networkInterval;
  n["gain_drift"] = gainDrift;
  n["gain_scope"] = gainScope;
  n["common_base"] = commonBase;
  n["network_drift"] = networkDrift;
  n["sound_every"] = soundEvery;
  n["sound_share"] = soundShare;
  n["noise_every"] = noiseEvery;
  n["followup_steps"] = followupSteps;
  n["small_bucket_kb"] = smallBucketKb;
  n["small_plan"] = smallPlan.toYaml();
  n["initial"] = initial.toYaml();
  if (pin) n["pin"] = pin->toYaml();
  YAML::Node p;
  probe.toYaml(p);
  n["probe"] = p;
  return n;
}

double statisticalCost(const std::string& stat, double vnmse, double gain, bool errorFeedback, double efRateScale) {
  if (stat == "gain") return gain > 0 && std::isfinite(gain) ? 1.0 / gain : INFINITY;
  if (!std::isfinite(vnmse) || vnmse < 0) return INFINITY;
  if (stat == "ef") return vnmse < 1 ? vnmse / (1 - vnmse) : INFINITY;
  if (stat == "ef_rate" && errorFeedback)  // k(1 − δ)/δ², δ = 1 − vNMSE (Karimireddy et al. 2019, Thm II)
    return vnmse < 1 ? efRateScale * vnmse / ((1 - vnmse) * (1 - vnmse)) : INFINITY;
  return vnmse;
}

double statisticalCost(const ControllerOptions& o, const Plan& plan, double vnmse, double gain) {
  return statisticalCost(o.stat, vnmse, gain, o.stat == "ef_rate" && plan.errorFeedback(), o.efRateScale);
}

}  // namespace gradzip::trainer
