// Implements controller/Followup.h.
#include "controller/Followup.h"

#include <nlohmann/json.hpp>

namespace gradzip::trainer {

bool Followup::add(double seconds, double exposed, int64_t steps) {
  if (step < 0 || count >= steps) return false;
  sum += seconds;
  sumBase += seconds - exposed;
  sumExposed += exposed;
  return ++count == steps;
}

nlohmann::json Followup::record(const std::string& plan) const {
  const double n = double(count), measured = sum / n;
  nlohmann::json rec{{"event", "followup"},
                     {"decision_step", step},
                     {"plan", plan},
                     {"predicted_step", predicted},
                     {"explored_step", explored},
                     {"measured_step", measured},
                     {"prediction_error", (predicted - measured) / measured},
                     {"measured_base", sumBase / n},
                     {"measured_exposed", sumExposed / n}};
  if (std::isfinite(predictedBase)) {
    rec["predicted_base"] = predictedBase;
    rec["predicted_exposed"] = predictedExposed;
  }
  return rec;
}

}  // namespace gradzip::trainer
