// The controller's candidate plans: every compressor family of
// ControllerOptions expanded into its parameter grid (the paper's TopK ratios
// for topk and artopk, bit budgets for topkc and THC, PowerSGD ranks, STAR and
// VAR for AR-TopK, THC's parameter-server and all-reduce forms), times every
// collective the compressor's capabilities allow. Combinations a compressor
// rejects are excluded. The list is a pure function of the options, so every
// rank builds the same list and a plan travels as its index.
#pragma once

#include "controller/ControllerOptions.h"

#include <string>
#include <vector>

namespace gradzip::trainer {

struct Candidate {
  Plan plan;
  std::string family;  // the compressor name
};

// UserError if no candidate remains (e.g. `collectives` excludes them all).
std::vector<Candidate> makeCandidates(const ControllerOptions& opts);

// Parses a Plan::key() back ("thc{bits: 4}@ps"): the inverse the decision log
// and `gradzip simulate` need. UserError on a malformed key.
Plan planFromKey(const std::string& key);

}  // namespace gradzip::trainer
