// Implements comm/RateSchedule.h: validation, parsing and lookup of rate steps
// on a clock of seconds or epochs.
#include "comm/RateSchedule.h"

#include "util/Error.h"

#include <cstdlib>

namespace gradzip::comm {

namespace {

std::string rateText(const std::optional<double>& mbit) { return mbit ? fmt::format("{}", *mbit) : "unshaped"; }

const char* unit(RateSchedule::Clock c) { return c == RateSchedule::Clock::kEpochs ? "epoch" : "s"; }

// "unshaped" or a number in range; `where` names the input for the error.
std::optional<double> parseRate(const std::string& s, const std::string& where) {
  if (s == "unshaped") return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  GZ_CHECK(!s.empty() && end && *end == '\0', "{}: rate '{}' is neither a number of Mbit/s nor 'unshaped'", where, s);
  return v;
}

}  // namespace

RateSchedule::RateSchedule(std::vector<RateStep> steps, Clock clock) : steps_(std::move(steps)), clock_(clock) {
  GZ_CHECK(!steps_.empty(), "rate schedule: needs at least one step");
  GZ_CHECK(steps_.front().start == 0.0, "rate schedule: the first step must start at 0 {}, not {} {}", unit(clock_),
           steps_.front().start, unit(clock_));
  for (size_t i = 0; i < steps_.size(); ++i) {
    const auto& s = steps_[i];
    GZ_CHECK(i == 0 || s.start > steps_[i - 1].start, "rate schedule: step {} starts at {} {}, not after step {} ({} {})",
             i, s.start, unit(clock_), i - 1, steps_[i - 1].start, unit(clock_));
    GZ_CHECK(!s.mbit || (*s.mbit >= kMinMbit && *s.mbit <= kMaxMbit),
             "rate schedule: step {} rate {} Mbit/s is outside [{}, {}]", i, rateText(s.mbit), kMinMbit, kMaxMbit);
  }
}

RateSchedule RateSchedule::constant(std::optional<double> mbit) { return RateSchedule({RateStep{0.0, mbit}}); }

RateSchedule RateSchedule::parse(const std::string& text) {
  if (text.find(':') == std::string::npos) return constant(parseRate(text, "network rate"));
  std::vector<RateStep> steps;
  std::optional<Clock> clock;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    const size_t colon = item.find(':');
    GZ_CHECK(colon != std::string::npos, "rate schedule '{}': step '{}' is not seconds:rate or epochse:rate", text,
             item);
    std::string at = item.substr(0, colon);
    const Clock c = !at.empty() && at.back() == 'e' ? Clock::kEpochs : Clock::kSeconds;
    if (c == Clock::kEpochs) at.pop_back();
    GZ_CHECK(!clock || *clock == c,
             "rate schedule '{}': step '{}' mixes seconds and epochs (\"e\" after the start); use one kind", text, item);
    clock = c;
    char* end = nullptr;
    double t = std::strtod(at.c_str(), &end);
    GZ_CHECK(!at.empty() && end && *end == '\0', "rate schedule '{}': start '{}' is not a number", text, at);
    steps.push_back(RateStep{t, parseRate(item.substr(colon + 1), "rate schedule '" + text + "'")});
    pos = comma + 1;
  }
  return RateSchedule(std::move(steps), *clock);
}

RateSchedule RateSchedule::fromYaml(YamlReader& parent, const std::string& key) {
  std::vector<RateStep> steps;
  std::optional<Clock> clock;
  for (auto& r : parent.childList(key)) {
    RateStep s;
    const bool at = r.has("at"), epoch = r.has("epoch");
    if (at == epoch)
      r.fail(at ? "epoch" : "at", at ? "give either `at` (seconds) or `epoch`, not both"
                                     : "each step needs `at` (seconds) or `epoch`");
    const Clock c = epoch ? Clock::kEpochs : Clock::kSeconds;
    if (clock && *clock != c)
      r.fail(epoch ? "epoch" : "at",
             "this schedule mixes `at` (seconds) and `epoch` steps; a schedule uses one kind");
    clock = c;
    s.start = r.requireDouble(epoch ? "epoch" : "at", 0.0);
    const std::string rate = r.requireString("mbit");
    try {
      s.mbit = parseRate(rate, "rate");
    } catch (const UserError& e) {
      r.fail("mbit", e.what());
    }
    r.finish();
    steps.push_back(s);
  }
  if (steps.empty()) return RateSchedule();  // absent key: no schedule
  try {
    return RateSchedule(std::move(steps), *clock);
  } catch (const UserError& e) {
    parent.fail(key, e.what());
  }
}

void RateSchedule::toYaml(YAML::Node& list) const {
  for (const auto& s : steps_) {
    YAML::Node n;
    n[inEpochs() ? "epoch" : "at"] = s.start;
    if (s.mbit)
      n["mbit"] = *s.mbit;
    else
      n["mbit"] = "unshaped";
    list.push_back(n);
  }
}

std::string RateSchedule::toString() const {
  std::string out;
  for (const auto& s : steps_)
    out += fmt::format("{}{}{}:{}", out.empty() ? "" : ",", s.start, inEpochs() ? "e" : "", rateText(s.mbit));
  return out;
}

std::optional<double> RateSchedule::rateAt(double when) const {
  GZ_ASSERT(!steps_.empty(), "rateAt on an empty schedule");
  std::optional<double> r = steps_.front().mbit;
  for (const auto& s : steps_)
    if (s.start <= when) r = s.mbit;
  return r;
}

}  // namespace gradzip::comm
