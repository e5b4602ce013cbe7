// The noise rule's private side (experiments/CompareSummary.h Noise,
// speedupOver): a speedup against an arm that may be missing, and the
// footnote that lists each speedup within noise with the reason. Private to
// CompareSummary's files.
#pragma once

#include "experiments/CompareSummary.h"

#include <optional>
#include <string>

namespace gradzip::experiments::detail {

inline std::optional<Speedup> speedup(const ArmStats& arm, const ArmStats* base, size_t targets) {
  if (!base) return std::nullopt;
  return speedupOver(arm, *base, targets);
}

// The † footnote: what it means, then noiseLines (or that no speedup is).
// "" when no arm has a speedup over FP16 or FP32 to judge.
std::string noiseFootnote(const SummaryInput& in, const ArmStats* fp16, const ArmStats* fp32);

}  // namespace gradzip::experiments::detail
