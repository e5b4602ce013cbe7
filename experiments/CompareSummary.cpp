// Implements the renderings of experiments/CompareSummary.h: summary.md (every
// column), the brief table `gradzip compare` prints, and summary.json, from an
// arm's repeats pooled by experiments/CompareArms.h. Reading a run is
// CompareRunStats.cpp; the noise rule is CompareNoise.cpp.
#include "experiments/CompareSummary.h"

#include "experiments/CompareArms.h"
#include "experiments/CompareNoise.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace gradzip::experiments {
using namespace detail;
namespace {

double meanOf(const ArmStats& a, double (*f)(const RunStats&)) {
  const auto s = over(a, [f](const RunStats& r) { return std::optional<double>(f(r)); });
  return s.mean;
}

Spread commFreeSpread(const ArmStats& a, size_t i) {
  return over(a, [i](const RunStats& r) { return r.commFreeToTarget[i]; });
}

// "1.26x", "1.26x†" within noise, "n/a".
std::string speedupCell(const std::optional<Speedup>& s) {
  if (!s) return "n/a";
  return fmt::format("{:.2f}x{}", s->ratio, s->noise == Noise::kNone ? "" : "†");
}

// TTA / comm-free TTA at the highest target every repeat reached, with that
// target; unknown for DDP peers.
std::optional<std::pair<double, double>> commFreeRatio(const ArmStats& a, const std::vector<double>& targets) {
  const auto runs = okRuns(a);
  if (runs.empty() || runs.front()->ddp) return std::nullopt;
  for (size_t i = targets.size(); i-- > 0;) {
    const Spread t = ttaSpread(a, i), c = commFreeSpread(a, i);
    if (t.all() && c.all() && c.mean > 0) return std::make_pair(t.mean / c.mean, targets[i]);
  }
  return std::nullopt;
}

std::optional<double> bitsPerCoordinate(const RunStats& r, int64_t parameters) {
  if (parameters <= 0 || r.steps <= 0) return std::nullopt;
  return 8.0 * static_cast<double>(r.bytes) / (static_cast<double>(parameters) * static_cast<double>(r.steps));
}

std::string cell(const Spread& s, const char* unit, int decimals) {
  if (s.reached == 0) return "never";
  std::string out = fmt::format("{:.{}f}{}", s.mean, decimals, unit);
  if (s.n > 1) out += fmt::format(" [{:.{}f}–{:.{}f}]", s.min, decimals, s.max, decimals);
  if (s.reached < s.n) out += fmt::format(" ({}/{})", s.reached, s.n);
  return out;
}

std::string planOf(const ArmStats& a, const RunStats& r) { return r.plan.empty() ? a.configuredPlan : r.plan; }

nlohmann::json opt(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(nullptr); }
nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

const ArmStats* find(const SummaryInput& in, const char* name) {
  for (const auto& a : in.arms)
    if (a.name == name && !okRuns(a).empty()) return &a;
  return nullptr;
}

// The arm's vNMSE: its runs' rows pooled, weighted by the measured steps.
std::optional<double> vnmseOf(const ArmStats& a) {
  double sum = 0;
  int64_t steps = 0;
  for (const auto* r : okRuns(a))
    if (r->vnmseSteps > 0) {
      sum += r->vnmse * static_cast<double>(r->vnmseSteps);
      steps += r->vnmseSteps;
    }
  if (steps == 0) return std::nullopt;
  return sum / static_cast<double>(steps);
}

std::vector<double> neverReached(const ArmStats& a, const std::vector<double>& targets) {
  std::vector<double> out;
  for (size_t i = 0; i < targets.size(); ++i)
    if (!ttaSpread(a, i).all()) out.push_back(targets[i]);
  return out;
}

// "failed (exit status 2)" for an arm with failed runs ("1/2 failed (...)" when
// not all), or "".
std::string failureNote(const ArmStats& a) {
  std::vector<std::string> why;
  for (const auto& r : a.runs)
    if (!r.failure.empty()) why.push_back(r.failure);
  if (why.empty()) return "";
  const std::string count = why.size() == a.runs.size() ? "" : fmt::format("{}/{} ", why.size(), a.runs.size());
  return fmt::format("**{}failed** ({})", count, fmt::join(why, "; "));
}

}  // namespace

std::string summaryMarkdown(const SummaryInput& in) {
  const ArmStats* fp16 = find(in, "fp16");
  const ArmStats* fp32 = find(in, "fp32");
  const size_t nt = in.targets.size();
  std::string md = fmt::format("# {}: time to accuracy\n\n| arm | plan | runs |", in.title);
  for (double t : in.targets) md += fmt::format(" TTA {:.3g} |", t);
  md += " final metric | utility vs FP16 | vs FP32 | never reached | train s | comm-free s | TTA / comm-free | "
        "steps | step ms | compute ms | exposed comm % | enc+dec % | bits/coord | vNMSE¹ | MB sent/rank |\n|";
  for (size_t i = 0; i < 18 + nt; ++i) md += "---|";
  md += "\n";
  for (const auto& a : in.arms) {
    const auto runs = okRuns(a);
    if (runs.empty()) {
      const std::string note = failureNote(a);
      md += fmt::format("| {} | {} |\n", a.name, note.empty() ? "(not run)" : note + ", no rows");
      continue;
    }
    const bool ddp = runs.front()->ddp;
    md += fmt::format("| {} | `{}` | {} |", a.name, planOf(a, *runs.front()),
                      runs.size() == a.runs.size() ? std::to_string(runs.size())
                                                   : fmt::format("{}/{}", runs.size(), a.runs.size()));
    for (size_t i = 0; i < nt; ++i) md += " " + cell(ttaSpread(a, i), " s", 1) + " |";
    const auto never = neverReached(a, in.targets);
    std::string neverText;
    for (double t : never) neverText += fmt::format("{}{:.3g}", neverText.empty() ? "" : ", ", t);
    if (const std::string note = failureNote(a); !note.empty())
      neverText = note + (neverText.empty() ? "" : ": " + neverText);
    const auto ratio = commFreeRatio(a, in.targets);
    const auto bits = over(a, [&](const RunStats& r) { return bitsPerCoordinate(r, a.parameters); });
    const double step = meanOf(a, [](const RunStats& r) { return r.step; });
    const double exposed = meanOf(a, [](const RunStats& r) { return r.exposed; });
    const double encDec = meanOf(a, [](const RunStats& r) { return r.encode + r.decode; });
    auto share = [&](double x) { return ddp || !(step > 0) ? std::string("n/a²") : fmt::format("{:.1f}%", 100 * x / step); };
    const auto vnmse = vnmseOf(a);
    md += fmt::format(
        " {} | {} | {} | {} | {} | {} | {} | {:.0f} | {:.1f} | {:.1f} | {} | {} | {} | {} | {:.1f} |\n",
        cell(over(a, [](const RunStats& r) { return std::optional<double>(r.finalMetric); }), "", 4),
        speedupCell(speedup(a, fp16, nt)), speedupCell(speedup(a, fp32, nt)), neverText.empty() ? "none" : neverText,
        cell(over(a, [](const RunStats& r) { return std::optional<double>(r.trainSeconds); }), "", 1),
        ddp ? "n/a²" : cell(over(a, [](const RunStats& r) { return std::optional<double>(r.commFreeSeconds); }), "", 1),
        ratio ? fmt::format("{:.2f} (@{:.3g})", ratio->first, ratio->second) : (ddp ? "n/a²" : "n/a"),
        meanOf(a, [](const RunStats& r) { return static_cast<double>(r.steps); }), step * 1e3,
        meanOf(a, [](const RunStats& r) { return r.compute; }) * 1e3, share(exposed), share(encDec),
        bits.reached ? cell(bits, "", 2) : "n/a", vnmse ? fmt::format("{:.3g}", *vnmse) : "n/a",
        meanOf(a, [](const RunStats& r) { return r.bytes / 1e6; }));
  }
  md += "\nTTA = training wall-clock seconds (evaluation excluded) until the test metric first reaches the target; "
        "\"never\" = not reached within the budget. With repeats, cells show the mean over the runs that reached "
        "it, [min–max], and (reached/runs) when some did not; \"never reached\" lists the targets at least one run "
        "missed, after \"failed\" when a run stopped early (its cells are from the rows it logged). Utility = TTA(FP16) / TTA(arm) (means) at the highest "
        "target every run of both reached; \"vs FP32\" likewise (†: within noise, listed at the end). "
        "Comm-free s = training seconds minus, per step, "
        "exposed communication + encode + decode (an optimistic bound: encode/decode count in full even where "
        "overlapped with backward); TTA / comm-free is the ratio of the two times to the highest target every run "
        "reached. Step ms is the mean; its spread over the evaluation windows is in summary.json. "
        "Shares are of the mean step time. bits/coord = 8 x bytes this rank sent / (parameters x steps), "
        "on the wire (a ring all-reduce sends about 2(n-1)/n x the payload).\n\n"
        "¹ vNMSE = ||x − C(x)||² / ||x||² of the compression on rank 0, from the TTA rows (measured every "
        "10th step, every step under the controller): the mean over the rows that carry it, each weighted by the "
        "steps it measured, pooled over repeats; n/a where no row carries it (DDP peers). A proxy, not the "
        "result.\n"
        "² PyTorch DDP does not split communication out of its backward pass, so its exposed communication, "
        "encode/decode and comm-free time are unknown (not zero).\n";
  md += noiseFootnote(in, fp16, fp32);
  return md;
}

std::string summaryBrief(const SummaryInput& in) {
  const ArmStats* fp16 = find(in, "fp16");
  const ArmStats* fp32 = find(in, "fp32");
  const size_t nt = in.targets.size();
  std::string md = fmt::format("# {}: time to accuracy\n\n| arm | plan |", in.title);
  for (double t : in.targets) md += fmt::format(" TTA {:.3g} |", t);
  md += " vs FP16 | vs FP32 | step ms | bits/coord | final metric |\n|";
  for (size_t i = 0; i < 7 + nt; ++i) md += "---|";
  md += "\n";
  for (const auto& a : in.arms) {
    const auto runs = okRuns(a);
    const std::string note = failureNote(a);
    if (runs.empty()) {
      md += fmt::format("| {} | {} |\n", a.name, note.empty() ? "(not run)" : note + ", no rows");
      continue;
    }
    md += fmt::format("| {} | `{}` |", a.name, planOf(a, *runs.front()));
    for (size_t i = 0; i < nt; ++i) md += " " + cell(ttaSpread(a, i), " s", 1) + " |";
    const auto [step, spread] = stepTimeAndSpread(a);
    const auto bits = over(a, [&](const RunStats& r) { return bitsPerCoordinate(r, a.parameters); });
    md += fmt::format(" {} | {} | {:.0f} ±{:.0f} | {} | {}{} |\n", speedupCell(speedup(a, fp16, nt)),
                      speedupCell(speedup(a, fp32, nt)), step * 1e3, spread * 1e3,
                      bits.reached ? fmt::format("{:.2f}", bits.mean) : "n/a",
                      cell(over(a, [](const RunStats& r) { return std::optional<double>(r.finalMetric); }), "", 4),
                      note.empty() ? "" : ", " + note);
  }
  md += "\nTTA = training seconds (evaluation excluded) until the test metric first reached the target; \"never\" = "
        "not within the budget. vs FP16 / vs FP32 = their TTA / this arm's, at the highest target both reached. "
        "step ms = mean ± spread over the evaluation windows. bits/coord = bits sent per parameter per step.\n";
  md += noiseFootnote(in, fp16, fp32);
  return md;
}

nlohmann::json summaryJson(const SummaryInput& in) {
  const ArmStats* fp16 = find(in, "fp16");
  const ArmStats* fp32 = find(in, "fp32");
  const size_t nt = in.targets.size();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : in.arms) {
    const auto runs = okRuns(a);
    nlohmann::json failures = nlohmann::json::array();
    for (const auto& r : a.runs)
      if (!r.failure.empty()) failures.push_back(r.failure);
    nlohmann::json j = {{"arm", a.name},           {"targets", in.targets},     {"repeats", a.runs.size()},
                        {"runs_ok", runs.size()}, {"parameters", a.parameters}, {"failed", failures}};
    if (runs.empty()) {
      out.push_back(j);
      continue;
    }
    const bool ddp = runs.front()->ddp;
    nlohmann::json tt = nlohmann::json::array(), lo = tt, hi = tt, reached = tt, cf = tt;
    for (size_t i = 0; i < nt; ++i) {
      const Spread s = ttaSpread(a, i), c = commFreeSpread(a, i);
      tt.push_back(num(s.mean));
      lo.push_back(num(s.min));
      hi.push_back(num(s.max));
      reached.push_back(s.reached);
      cf.push_back(ddp ? nlohmann::json(nullptr) : num(c.mean));
    }
    const auto fm = over(a, [](const RunStats& r) { return std::optional<double>(r.finalMetric); });
    const auto ratio = commFreeRatio(a, in.targets);
    const auto bits = over(a, [&](const RunStats& r) { return bitsPerCoordinate(r, a.parameters); });
    const double step = meanOf(a, [](const RunStats& r) { return r.step; });
    const double exposed = meanOf(a, [](const RunStats& r) { return r.exposed; });
    const double enc = meanOf(a, [](const RunStats& r) { return r.encode; });
    const double dec = meanOf(a, [](const RunStats& r) { return r.decode; });
    auto unknownIfDdp = [&](double x) { return ddp ? nlohmann::json(nullptr) : num(x); };
    const auto u16 = speedup(a, fp16, nt), u32 = speedup(a, fp32, nt);
    auto ratioJson = [](const std::optional<Speedup>& x) { return x ? num(x->ratio) : nlohmann::json(nullptr); };
    auto noiseJson = [](const std::optional<Speedup>& x) {
      return x ? nlohmann::json(noiseName(x->noise)) : nlohmann::json(nullptr);
    };
    nlohmann::json perRun = nlohmann::json::array();
    for (size_t k = 0; k < a.runs.size(); ++k) {
      const auto& r = a.runs[k];
      nlohmann::json rt = nlohmann::json::array();
      for (const auto& t : r.timeToTarget) rt.push_back(opt(t));
      perRun.push_back({{"repeat", k}, {"ok", r.ok}, {"time_to_target", rt}, {"final_metric", num(r.finalMetric)},
                        {"train_seconds", r.trainSeconds}, {"steps", r.steps}, {"vnmse", num(r.vnmse)},
                        {"failed", r.failure.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.failure)}});
    }
    j.update({{"plan", planOf(a, *runs.front())},
              {"time_to_target", tt},
              {"time_to_target_min", lo},
              {"time_to_target_max", hi},
              {"reached", reached},
              {"never_reached", neverReached(a, in.targets)},
              {"comm_free_time_to_target", cf},
              {"final_metric", num(fm.mean)},
              {"final_metric_min", num(fm.min)},
              {"final_metric_max", num(fm.max)},
              {"utility_vs_fp16", ratioJson(u16)},
              {"utility_vs_fp16_noise", noiseJson(u16)},
              {"speedup_vs_fp32", ratioJson(u32)},
              {"speedup_vs_fp32_noise", noiseJson(u32)},
              {"train_seconds", num(meanOf(a, [](const RunStats& r) { return r.trainSeconds; }))},
              {"comm_free_seconds", unknownIfDdp(meanOf(a, [](const RunStats& r) { return r.commFreeSeconds; }))},
              {"tta_over_comm_free", ratio ? nlohmann::json(ratio->first) : nlohmann::json(nullptr)},
              {"tta_over_comm_free_target", ratio ? nlohmann::json(ratio->second) : nlohmann::json(nullptr)},
              {"steps", num(meanOf(a, [](const RunStats& r) { return static_cast<double>(r.steps); }))},
              {"step_seconds", num(step)},
              {"step_seconds_sd", num(stepTimeAndSpread(a).second)},
              {"compute_seconds", num(meanOf(a, [](const RunStats& r) { return r.compute; }))},
              {"exposed_seconds", unknownIfDdp(exposed)},
              {"encode_seconds", unknownIfDdp(enc)},
              {"decode_seconds", unknownIfDdp(dec)},
              {"encode_decode_seconds", unknownIfDdp(enc + dec)},
              {"exposed_share", step > 0 ? unknownIfDdp(exposed / step) : nlohmann::json(nullptr)},
              {"encode_decode_share", step > 0 ? unknownIfDdp((enc + dec) / step) : nlohmann::json(nullptr)},
              {"bits_per_coordinate", bits.reached ? num(bits.mean) : nlohmann::json(nullptr)},
              {"vnmse", opt(vnmseOf(a))},
              {"bytes", num(meanOf(a, [](const RunStats& r) { return static_cast<double>(r.bytes); }))},
              {"runs", perRun}});
    out.push_back(j);
  }
  return out;
}

}  // namespace gradzip::experiments
