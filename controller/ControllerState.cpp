// Implements controller/ControllerState.h: one double tensor per numeric field,
// the plan key as a string IValue.
#include "controller/ControllerState.h"

#include "util/Error.h"

#include <fmt/format.h>

#include <cmath>

namespace gradzip::trainer {
namespace {

constexpr const char* kPrefix = "controller/";

void put(torch::serialize::OutputArchive& ar, const std::string& name, double value) {
  ar.write(kPrefix + name, torch::tensor({value}, torch::kDouble), true);
}

double get(torch::serialize::InputArchive& ar, const std::string& name) {
  torch::Tensor t;
  if (!ar.try_read(kPrefix + name, t, true))
    throw UserError(fmt::format("checkpoint: controller state version {} lacks the field '{}'",
                                ControllerState::kVersion, name));
  if (t.numel() != 1) throw UserError(fmt::format("checkpoint: controller field '{}' is not one number", name));
  return t.item<double>();
}

int64_t getCount(torch::serialize::InputArchive& ar, const std::string& name, int64_t lowest) {
  const double v = get(ar, name);
  if (!std::isfinite(v) || v < double(lowest) || v != std::floor(v))
    throw UserError(fmt::format("checkpoint: controller field '{}' is {}, expected an integer >= {}", name, v, lowest));
  return int64_t(v);
}

}  // namespace

void ControllerState::save(torch::serialize::OutputArchive& ar) const {
  put(ar, "version", double(kVersion));
  ar.write(std::string(kPrefix) + "plan", c10::IValue(plan));
  put(ar, "decided", decided);
  put(ar, "last_decision", double(lastDecision));
  put(ar, "decisions", double(decisions));
  put(ar, "alpha", alpha);
  put(ar, "beta", beta);
  put(ar, "provisional_done", provisionalDone);
  put(ar, "step_armed", stepArmed);
  put(ar, "step_reference", stepReference);
  put(ar, "sync_reference", syncReference);
  put(ar, "plan_steps", double(planSteps));
  put(ar, "measured_refs", measuredRefs);
  put(ar, "network_backoff", double(networkBackoff));
  for (size_t i = 0; i < noise.size(); ++i) put(ar, fmt::format("noise{}", i), noise[i]);
}

ControllerState ControllerState::load(torch::serialize::InputArchive& ar) {
  torch::Tensor version;
  if (!ar.try_read(std::string(kPrefix) + "version", version, true)) {
    torch::Tensor legacy;
    const bool old = ar.try_read(std::string(kPrefix) + "state", legacy, true);
    throw UserError(fmt::format(
        "checkpoint: {}; this gradzip reads controller state version {}: resume with the gradzip that wrote it, "
        "or start the run anew",
        old ? "the controller state is the unversioned positional format of an older gradzip"
            : "it holds no controller state (written by a run without `compress: auto`?)",
        kVersion));
  }
  const double v = version.numel() == 1 ? version.item<double>() : NAN;
  if (v != double(kVersion))
    throw UserError(fmt::format("checkpoint: controller state version {}, this gradzip reads version {}", v, kVersion));
  ControllerState s;
  c10::IValue plan;
  if (!ar.try_read(std::string(kPrefix) + "plan", plan) || !plan.isString())
    throw UserError("checkpoint: controller field 'plan' is missing or not a plan key");
  s.plan = plan.toStringRef();
  s.decided = get(ar, "decided") != 0;
  s.lastDecision = getCount(ar, "last_decision", 0);
  s.decisions = getCount(ar, "decisions", 0);
  s.alpha = get(ar, "alpha");
  s.beta = get(ar, "beta");
  s.provisionalDone = get(ar, "provisional_done") != 0;
  s.stepArmed = get(ar, "step_armed") != 0;
  s.stepReference = get(ar, "step_reference");
  s.syncReference = get(ar, "sync_reference");
  s.planSteps = getCount(ar, "plan_steps", 0);
  s.measuredRefs = get(ar, "measured_refs") != 0;
  s.networkBackoff = getCount(ar, "network_backoff", 1);
  for (size_t i = 0; i < s.noise.size(); ++i) s.noise[i] = get(ar, fmt::format("noise{}", i));
  return s;
}

}  // namespace gradzip::trainer
