// Implements the noise rule of experiments/CompareSummary.h (noiseName,
// speedupOver) and its footnote (experiments/CompareNoise.h): a speedup is
// within noise when the runs' evaluation windows at the target overlap, or
// when, with a single run on one side, the step times agree within their
// spread.
#include "experiments/CompareNoise.h"

#include "experiments/CompareArms.h"

#include <fmt/format.h>

#include <cmath>

namespace gradzip::experiments {
namespace detail {
namespace {

// One line per speedup over FP16 or FP32 within noise, saying why; "" if none.
std::string noiseLines(const SummaryInput& in, const ArmStats* fp16, const ArmStats* fp32) {
  std::string out;
  for (const auto& a : in.arms) {
    if (okRuns(a).empty()) continue;
    for (const ArmStats* base : {fp16, fp32}) {
      const auto s = speedup(a, base, in.targets.size());
      if (!s || s->noise == Noise::kNone) continue;
      const auto [wa0, wa1] = crossingWindow(a, s->target);
      const auto [wb0, wb1] = crossingWindow(*base, s->target);
      const auto [sa, da] = stepTimeAndSpread(a);
      const auto [sb, db] = stepTimeAndSpread(*base);
      const std::string head = fmt::format("- {} vs {} ({:.2f}x at {:.3g}): ", a.name, base->name, s->ratio,
                                           in.targets[s->target]);
      if (s->noise == Noise::kEvalInterval)
        out += head + fmt::format("they first reached it in overlapping evaluation windows "
                                  "({:.1f}–{:.1f} s and {:.1f}–{:.1f} s), so the evaluations cannot order them.\n",
                                  wa0, wa1, wb0, wb1);
      else
        out += head + fmt::format("step times {:.0f} ±{:.0f} and {:.0f} ±{:.0f} ms agree within "
                                  "their spread, so the gap is in steps to the target: one run's accuracy path, "
                                  "not faster steps.\n",
                                  sa * 1e3, da * 1e3, sb * 1e3, db * 1e3);
    }
  }
  return out;
}

}  // namespace

std::string noiseFootnote(const SummaryInput& in, const ArmStats* fp16, const ArmStats* fp32) {
  const std::string lines = noiseLines(in, fp16, fp32);
  bool any = false;  // a speedup over FP16 or FP32 to judge
  for (const auto& a : in.arms)
    for (const ArmStats* base : {fp16, fp32})
      any |= &a != base && !okRuns(a).empty() && speedup(a, base, in.targets.size()).has_value();
  if (!any) return "";
  if (lines.empty())
    return "\nNo speedup here is within noise: in each, the two arms first reached the target in separate "
           "evaluation windows, and their step times differ by more than their spread.\n";
  return "\n† Within noise: these runs cannot resolve the speedups below, so do not read them as one plan "
         "being faster.\n" +
         lines;
}

}  // namespace detail

using namespace detail;

const char* noiseName(Noise n) {
  switch (n) {
    case Noise::kNone: return "none";
    case Noise::kEvalInterval: return "eval_interval";
    case Noise::kStepTime: return "step_time";
  }
  return "none";
}

std::optional<Speedup> speedupOver(const ArmStats& arm, const ArmStats& base, size_t targets) {
  for (size_t i = targets; i-- > 0;) {
    const Spread a = ttaSpread(arm, i), b = ttaSpread(base, i);
    if (!(a.all() && b.all() && a.mean > 0)) continue;
    Speedup s{b.mean / a.mean, i, Noise::kNone};
    if (&arm == &base) return s;
    const auto [a0, a1] = crossingWindow(arm, i);
    const auto [b0, b1] = crossingWindow(base, i);
    const auto [sa, da] = stepTimeAndSpread(arm);
    const auto [sb, db] = stepTimeAndSpread(base);
    if (a0 < b1 && b0 < a1) s.noise = Noise::kEvalInterval;
    else if (std::abs(sa - sb) <= da + db && (a.n == 1 || b.n == 1)) s.noise = Noise::kStepTime;
    return s;
  }
  return std::nullopt;
}

}  // namespace gradzip::experiments
