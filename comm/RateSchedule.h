// A bandwidth schedule for network emulation: a list of steps (a start on the
// schedule's clock, rate in Mbit/s or "unshaped"), like the C1/C2 schedules of
// the flexible-communication paper (Fig. 6). The clock is either seconds since
// the schedule started or training epochs (fractional, as rank 0 of the
// trainer reports them through a progress file: launch/ProgressFile.h); one
// schedule uses one clock. The rate of a step holds until the next step starts;
// the last step holds forever. Latency is not part of a schedule: the kernel has
// no netem, so gradzip emulates latency inside its communicator
// (Communicator::setSendDelay, DESIGN.md §8).
#pragma once

#include "util/Yaml.h"

#include <optional>
#include <string>
#include <vector>

namespace gradzip::comm {

struct RateStep {
  // Start on the schedule's clock: seconds, or epochs (RateSchedule::clock()).
  double start = 0.0;
  // Link rate in Mbit/s (of Ethernet frames, as tc counts); nullopt = unshaped.
  std::optional<double> mbit;
};

class RateSchedule {
 public:
  enum class Clock { kSeconds, kEpochs };

  RateSchedule() = default;
  // Steps must have strictly increasing starts >= 0, the first at 0, and rates
  // in [kMinMbit, kMaxMbit]; otherwise UserError naming the step.
  explicit RateSchedule(std::vector<RateStep> steps, Clock clock = Clock::kSeconds);
  // A single step at 0 (seconds).
  static RateSchedule constant(std::optional<double> mbit);

  // Parses "0:50,10:unshaped,20:10" (seconds:Mbit/s or seconds:unshaped), the
  // same in epochs with an "e" after every start ("0e:50,2e:10,4.5e:unshaped"),
  // or a single rate ("20", "unshaped") for a constant schedule. Mixing seconds
  // and epochs is a UserError.
  static RateSchedule parse(const std::string& text);
  // YAML: a list of {at: seconds, mbit: number | unshaped} or of {epoch: E,
  // mbit: ...}, one kind per list (a ConfigError naming file:line:key
  // otherwise); an absent key gives an empty schedule.
  static RateSchedule fromYaml(YamlReader& parent, const std::string& key);
  void toYaml(YAML::Node& list) const;
  // The parse() form: parse(toString()) gives the same schedule.
  std::string toString() const;

  const std::vector<RateStep>& steps() const { return steps_; }
  bool empty() const { return steps_.empty(); }
  Clock clock() const { return clock_; }
  bool inEpochs() const { return clock_ == Clock::kEpochs; }
  // The rate in force at `when` (>= 0, on the schedule's clock); the schedule
  // must not be empty.
  std::optional<double> rateAt(double when) const;

  static constexpr double kMinMbit = 0.1;
  static constexpr double kMaxMbit = 100000.0;

 private:
  std::vector<RateStep> steps_;
  Clock clock_ = Clock::kSeconds;
};

}  // namespace gradzip::comm
