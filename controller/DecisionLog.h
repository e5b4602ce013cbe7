// The controller's logs in the run directory: <run>/decisions.jsonl (rank 0:
// every decision with its inputs, and the start, beta, provisional,
// sounding, noise, follow-up and resume records), <run>/rank<r>/plans.jsonl
// (this rank's plan changes, with the wire bits per coordinate) and
// <run>/rank<r>/undone.jsonl (steps trained and then undone). Every record is
// one JSON line, flushed as it is written, so a killed run leaves whole lines
// behind; a resumed run trims them to the step it resumed from (resumed()).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <fstream>
#include <string>

namespace gradzip::trainer {

class DecisionLog {
 public:
  // Creates <runDir>/rank<rank>/ and opens this rank's logs for appending.
  // UserError when they cannot be written.
  DecisionLog(std::string runDir, int rank);

  // Rank 0: appends `rec` to decisions.jsonl; nothing on the other ranks.
  void write(const nlohmann::json& rec);
  // `plan` (a key) runs the large buckets from `step`, at `bits` wire bits
  // per coordinate over them.
  void plan(int64_t step, const std::string& plan, double bits);
  // `steps` steps after `step` ran `plan` (a key) and were undone `by`
  // exploration or the provisional rewind; nothing for 0 steps.
  void undone(int64_t step, const std::string& plan, int64_t steps, const char* by);
  // Once a resumed run knows its step: each log keeps only the records of
  // steps up to it (util/RunLogs.h), the records this process wrote before
  // (the start's) dropped, and decisions.jsonl gets a `resume` record naming
  // the plan the run goes on with.
  void resumed(int64_t step, const std::string& plan);

 private:
  std::string runDir_;
  int rank_;
  std::ofstream planLog_, undoneLog_;
  uintmax_t planLogBytes_ = 0, undoneLogBytes_ = 0;  // their sizes when this process opened them
};

}  // namespace gradzip::trainer
