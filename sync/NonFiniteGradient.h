// NonFiniteGradient: the error a gradient synchronisation throws when any
// rank's gradient holds a NaN or Inf. The training loop's NaN policy catches
// it; the controller's exploration drops the candidate that caused it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gradzip::trainer {

// A NaN or Inf gradient seen by any rank; thrown on every rank at the same
// bucket so the trainer's NaN policy applies consistently.
class NonFiniteGradient : public std::runtime_error {
 public:
  NonFiniteGradient(int64_t step, const std::string& where)
      : std::runtime_error("step " + std::to_string(step) + ": non-finite gradient (" + where + ")"), step(step) {}
  int64_t step;
};

}  // namespace gradzip::trainer
