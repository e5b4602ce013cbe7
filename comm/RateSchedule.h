// A bandwidth schedule for network emulation: a list of steps (start time in
// seconds from the schedule's start, rate in Mbit/s or "unshaped"), like the
// per-epoch C1/C2 schedules of the flexible-communication paper (Fig. 6; the
// caller maps epochs to times). The rate of a step holds until the next step
// starts; the last step holds forever. Latency is not part of a schedule: the
// kernel has no netem, so gradzip emulates latency inside its own collectives
// (Communicator::setSendDelay, DESIGN.md §8).
#pragma once

#include "util/Yaml.h"

#include <optional>
#include <string>
#include <vector>

namespace gradzip::comm {

struct RateStep {
  double startSeconds = 0.0;
  // Link rate in Mbit/s (of Ethernet frames, as tc counts); nullopt = unshaped.
  std::optional<double> mbit;
};

class RateSchedule {
 public:
  RateSchedule() = default;
  // Steps must have strictly increasing start times >= 0, the first at 0, and
  // rates in [kMinMbit, kMaxMbit]; otherwise UserError naming the step.
  explicit RateSchedule(std::vector<RateStep> steps);
  // A single step at t = 0.
  static RateSchedule constant(std::optional<double> mbit);

  // Parses "0:50,10:unshaped,20:10" (seconds:Mbit/s or seconds:unshaped), or a
  // single rate ("20", "unshaped") for a constant schedule.
  static RateSchedule parse(const std::string& text);
  // YAML: a list of {at: seconds, mbit: number | unshaped}; an absent key gives
  // an empty schedule.
  static RateSchedule fromYaml(YamlReader& parent, const std::string& key);
  void toYaml(YAML::Node& list) const;
  std::string toString() const;

  const std::vector<RateStep>& steps() const { return steps_; }
  bool empty() const { return steps_.empty(); }
  // The rate in force at `seconds` (>= 0); the schedule must not be empty.
  std::optional<double> rateAt(double seconds) const;

  static constexpr double kMinMbit = 0.1;
  static constexpr double kMaxMbit = 100000.0;

 private:
  std::vector<RateStep> steps_;
};

}  // namespace gradzip::comm
