// Weighted least squares for the α-β model seconds ≈ a·α + m·β, where each
// observation carries its own coefficients: a = 1, m = bytes for one
// point-to-point message; a = 2(N−1), m = 2(N−1)/N·bytes for a ring all-reduce
// of `bytes` over N ranks (flexible-communication paper, Table I). Shared by the
// ping-pong probe and the LinkFitter of observed collective timings.
#pragma once

#include "comm/CostModel.h"  // NetworkParams

#include <optional>
#include <vector>

namespace gradzip::comm {

// 8/β: the link's bandwidth in bit/s (0 when β is 0, i.e. unknown).
inline double bandwidthBitsPerSec(const NetworkParams& p) { return p.beta > 0.0 ? 8.0 / p.beta : 0.0; }
// α + M·β: one point-to-point message of `bytes`.
inline double pointToPointSeconds(const NetworkParams& p, double bytes) { return p.alpha + bytes * p.beta; }

struct AlphaBetaSample {
  double alphaCount = 1.0;  // a: latency terms in the observation
  double betaBytes = 0.0;   // m: bytes charged at β
  double seconds = 0.0;     // observed time (> 0)
};

// Minimises Σ wᵢ·(yᵢ − aᵢα − mᵢβ)², with wᵢ the inverse variance of yᵢ when the
// caller knows it. Without weights, wᵢ = 1/yᵢ² (relative residuals: timing
// noise that grows with the time itself; small messages then pin α and large
// ones pin β). Weights must be >= 0 (0 drops the sample). Constrained to α, β >= 0 (the one-parameter solution on the boundary when
// the free optimum is negative). Returns nullopt when α and β are not
// identifiable (fewer than two linearly independent (a, m) with weight > 0) or
// a sample has seconds <= 0.
std::optional<NetworkParams> fitAlphaBeta(const std::vector<AlphaBetaSample>& samples,
                                          const std::vector<double>& weights = {});

}  // namespace gradzip::comm
