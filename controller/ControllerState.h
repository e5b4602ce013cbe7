// The controller's checkpointed state: named fields with a format version, so
// a resumed run reads exactly what the killed one wrote, and a checkpoint from
// another format gets an error naming what differs (the version, or the
// missing field) rather than a misread position in a tensor.
#pragma once

#include <torch/serialize/archive.h>

#include <array>
#include <cstdint>
#include <string>

namespace gradzip::trainer {

struct ControllerState {
  // Bump when a field is added, removed or changes meaning.
  static constexpr int64_t kVersion = 1;

  std::string plan;              // the large buckets' running plan (Plan::key)
  bool decided = false;          // a decision has been taken
  int64_t lastDecision = 0;      // its step
  int64_t decisions = 0;         // decisions so far
  double alpha = 0, beta = 0;    // the link model, kept for the record (start() re-measures)
  bool provisionalDone = false;  // the provisional step has run
  // The step-time trigger's reference (armed), its step and step − compute.
  bool stepArmed = false;
  double stepReference = 0, syncReference = 0;
  int64_t planSteps = 0;       // steps observed on the running plan
  bool measuredRefs = false;   // the references are measured steps, not a prediction
  int64_t networkBackoff = 1;  // network_interval multiplier after false alarms
  std::array<double, 3> noise{};  // the gradient noise scale's running sums (GradientNoise::sums)

  // Writes every field under "controller/<name>" and "controller/version".
  void save(torch::serialize::OutputArchive& ar) const;
  // UserError naming the difference: a checkpoint without a version (an
  // older format), another version, or a missing or malformed field.
  static ControllerState load(torch::serialize::InputArchive& ar);
};

}  // namespace gradzip::trainer
