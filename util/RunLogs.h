// A run's append-only logs (tta.jsonl/csv, decisions.jsonl, rank<r>/plans.jsonl
// and rank<r>/undone.jsonl) after a resume. A kill lands after the last
// checkpoint, so each log holds lines of steps the resumed run trains again;
// they are dropped, else those steps would be logged twice (and `gradzip
// simulate` would read the undone steps' gradient noise and follow-ups next
// to the redone ones). A line torn by the kill does not parse and is dropped
// with them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace gradzip {

// Rewrites `path` (if it exists) with the lines for which keep(line) holds,
// empty lines dropped. UserError naming the file when it cannot be rewritten.
void keepLines(const std::string& path, const std::function<bool(const std::string&)>& keep);

// The step a JSON line belongs to: its integer "step", else its
// "decision_step" (a decision's follow-up), else -1 (also for a line that
// does not parse).
int64_t jsonLineStep(const std::string& line);

// Keeps the JSON lines of `path` whose step (jsonLineStep) is in [0, step].
void keepJsonLinesThrough(const std::string& path, int64_t step);

}  // namespace gradzip
