// Implements controller/PlanCost.h; each branch cites its row of Table I or its
// equation in the flexible-communication paper.
#include "controller/PlanCost.h"

#include "compress/Factory.h"

#include "util/Error.h"
#include "util/Yaml.h"

#include <cmath>

namespace gradzip::trainer {
namespace {

struct Coef {
  double a = 0, m = 0;
};

// Table I coefficients of a dense collective moving M bytes per rank.
Coef collectiveCoef(const std::string& name, double bytes, int n) {
  const double N = n, logN = std::log2(N);
  if (name == "engine" || name == "ring") return {2 * (N - 1), 2 * (N - 1) / N * bytes};
  if (name == "tree") return {2 * logN, 2 * logN * bytes};
  if (name == "ps") return {2 * (N - 1), 2 * (N - 1) / N * bytes};
  if (name == "allgather") return {logN, (N - 1) * bytes};
  throw UserError(fmt::format("plan cost: unknown collective '{}' (engine, ring, tree, ps, allgather)", name));
}

double optionDouble(const Plan& plan, const char* key, double def) {
  if (!plan.options || !plan.options.IsMap() || !plan.options[key]) return def;
  return plan.options[key].as<double>();
}

}  // namespace

comm::AlphaBetaSample planCoefficients(const Plan& plan, double bitsPerCoordinate, int64_t d, int n,
                                        std::optional<double> downlinkBitsPerCoordinate) {
  GZ_CHECK(n >= 1 && d >= 0 && bitsPerCoordinate >= 0 && downlinkBitsPerCoordinate.value_or(0) >= 0,
           "plan cost: bad arguments (n={}, d={}, b={}, downlink b={})", n, d, bitsPerCoordinate,
           downlinkBitsPerCoordinate.value_or(bitsPerCoordinate));
  if (n == 1) return {0.0, 0.0, 0.0};
  const double N = n, logN = std::log2(N);
  Coef c;
  if (plan.compressor == "artopk") {
    // Eq. 4: M = 4d bytes of fp32 gradient, Mc of int32 indices broadcast and
    // Mc of values all-reduced.
    const double mc = 4.0 * double(d) * optionDouble(plan, "cr", 0.01);
    if (plan.collective == "tree") {
      c = {3 * logN, 3 * mc * logN};  // Eq. 4b
    } else if (plan.collective == "ps") {
      const Coef ar = collectiveCoef("ps", mc, n);
      c = {logN + ar.a, logN * mc + ar.m};  // broadcast (Table I) + sharded PS
    } else {
      c = {2 * (N - 1) + logN, mc * (2 * (N - 1) / N + logN)};  // Eq. 4a
    }
    if (plan.options && plan.options["mode"] && plan.options["mode"].as<std::string>() == "var") {
      const Coef ag = collectiveCoef("allgather", 4.0, n);  // one float norm per rank
      c.a += ag.a;
      c.m += ag.m;
    }
  } else {
    // A scheme that aggregates by all-gather (TopK, whose "engine" is c10d's
    // all-gather: compress/Factory.h aggregatesByAllGather) moves (N − 1)·M,
    // not the all-reduce's 2(N − 1)/N·M; the two agree at N = 2 only
    // (experiments/results/controller_ablation.md, "4 ranks at the current
    // defaults").
    const std::string collective =
        compress::aggregatesByAllGather(plan.compressor) ? std::string("allgather") : plan.collective;
    c = collectiveCoef(collective, bitsPerCoordinate * double(d) / 8.0, n);
    if (collective == "ps" && downlinkBitsPerCoordinate) {
      // Sharded PS: (N − 1)/N of the uplink out, N − 1 copies of the owned
      // shard's downlink (M↓/N each) back.
      c.m = (N - 1) / N * (bitsPerCoordinate + *downlinkBitsPerCoordinate) * double(d) / 8.0;
    }
    // Each further round (TopKC's norms, PowerSGD's P, THC's ranges and its
    // saturation count) one more latency term of the collective, no bytes
    // charged.
    c.a += (compress::collectiveRounds(plan.compressor, plan.options) - 1) * collectiveCoef(collective, 0.0, n).a;
  }
  return {c.a, c.m, 0.0};
}

}  // namespace gradzip::trainer
