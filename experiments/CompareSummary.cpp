// Implements experiments/CompareSummary.h: reading TTA logs, aggregating
// repeats (mean and min–max), and rendering summary.md / summary.json.
#include "experiments/CompareSummary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace gradzip::experiments {
namespace {

// Mean and range of the values that exist, out of n runs.
struct Spread {
  int reached = 0, n = 0;
  double mean = NAN, min = NAN, max = NAN;
  bool all() const { return n > 0 && reached == n; }
};

Spread spreadOf(const std::vector<std::optional<double>>& v) {
  Spread s;
  s.n = static_cast<int>(v.size());
  double sum = 0;
  for (const auto& x : v) {
    if (!x) continue;
    s.min = s.reached ? std::min(s.min, *x) : *x;
    s.max = s.reached ? std::max(s.max, *x) : *x;
    sum += *x;
    ++s.reached;
  }
  if (s.reached) s.mean = sum / s.reached;
  return s;
}

std::vector<const RunStats*> okRuns(const ArmStats& a) {
  std::vector<const RunStats*> out;
  for (const auto& r : a.runs)
    if (r.ok) out.push_back(&r);
  return out;
}

template <class F>
Spread over(const ArmStats& a, F f) {
  std::vector<std::optional<double>> v;
  for (const auto* r : okRuns(a)) v.push_back(f(*r));
  return spreadOf(v);
}

double meanOf(const ArmStats& a, double (*f)(const RunStats&)) {
  const auto s = over(a, [f](const RunStats& r) { return std::optional<double>(f(r)); });
  return s.mean;
}

Spread ttaSpread(const ArmStats& a, size_t i) { return over(a, [i](const RunStats& r) { return r.timeToTarget[i]; }); }
Spread commFreeSpread(const ArmStats& a, size_t i) {
  return over(a, [i](const RunStats& r) { return r.commFreeToTarget[i]; });
}

// The arm's mean step time and its spread, pooled over repeats: the square
// root of the mean over runs of (run spread² + (run mean − mean)²).
std::pair<double, double> stepTimeAndSpread(const ArmStats& a) {
  const auto runs = okRuns(a);
  if (runs.empty()) return {NAN, NAN};
  double mean = 0, var = 0;
  for (const auto* r : runs) mean += r->step / static_cast<double>(runs.size());
  for (const auto* r : runs)
    var += (r->stepSd * r->stepSd + (r->step - mean) * (r->step - mean)) / static_cast<double>(runs.size());
  return {mean, std::sqrt(var)};
}

// [earliest window start, latest crossing] over the arm's runs at target i;
// every run reached it.
std::pair<double, double> crossingWindow(const ArmStats& a, size_t i) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto* r : okRuns(a)) {
    lo = std::min(lo, r->targetWindowStart[i].value_or(0.0));
    hi = std::max(hi, *r->timeToTarget[i]);
  }
  return {lo, hi};
}

std::optional<Speedup> speedup(const ArmStats& arm, const ArmStats* base, size_t targets) {
  if (!base) return std::nullopt;
  return speedupOver(arm, *base, targets);
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

// Steps s in [from, to) the trainer measured compression on (s % every == 0).
int64_t measuredSteps(int64_t from, int64_t to, int64_t every) {
  if (to <= from) return 0;
  auto upTo = [every](int64_t x) { return x <= 0 ? 0 : (x - 1) / every + 1; };  // multiples of every in [0, x)
  return upTo(to) - upTo(from);
}

std::vector<double> neverReached(const ArmStats& a, const std::vector<double>& targets) {
  std::vector<double> out;
  for (size_t i = 0; i < targets.size(); ++i)
    if (!ttaSpread(a, i).all()) out.push_back(targets[i]);
  return out;
}

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

// The † footnote: what it means, then noiseLines (or that no speedup is).
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

}  // namespace

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

// "failed (exit status 2)" for an arm with failed runs ("1/2 failed (...)" when
// not all), or "".
static std::string failureNote(const ArmStats& a) {
  std::vector<std::string> why;
  for (const auto& r : a.runs)
    if (!r.failure.empty()) why.push_back(r.failure);
  if (why.empty()) return "";
  const std::string count = why.size() == a.runs.size() ? "" : fmt::format("{}/{} ", why.size(), a.runs.size());
  return fmt::format("**{}failed** ({})", count, fmt::join(why, "; "));
}

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
