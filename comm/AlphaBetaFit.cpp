// Implements comm/AlphaBetaFit.h: the 2x2 weighted normal equations with a
// non-negativity fallback.
#include "comm/AlphaBetaFit.h"

#include "util/Error.h"

#include <cmath>

namespace gradzip::comm {

std::optional<NetworkParams> fitAlphaBeta(const std::vector<AlphaBetaSample>& samples,
                                          const std::vector<double>& weights) {
  GZ_ASSERT(weights.empty() || weights.size() == samples.size(), "one weight per sample");
  double suu = 0, sux = 0, sxx = 0, suy = 0, sxy = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    if (!(s.seconds > 0.0) || !std::isfinite(s.seconds)) return std::nullopt;
    const double w = weights.empty() ? 1.0 / (s.seconds * s.seconds) : weights[i];
    if (!(w > 0.0)) continue;
    suu += w * s.alphaCount * s.alphaCount;
    sux += w * s.alphaCount * s.betaBytes;
    sxx += w * s.betaBytes * s.betaBytes;
    suy += w * s.alphaCount * s.seconds;
    sxy += w * s.betaBytes * s.seconds;
  }
  const double det = suu * sxx - sux * sux;
  // Cauchy–Schwarz: det >= 0, with equality iff every (a, m) is proportional.
  if (!(suu > 0.0 && sxx > 0.0) || det <= 1e-9 * suu * sxx) return std::nullopt;
  NetworkParams p;
  p.alpha = (suy * sxx - sxy * sux) / det;
  p.beta = (sxy * suu - suy * sux) / det;
  // Boundary solutions of the constrained problem: drop the negative parameter
  // and solve for the other alone.
  if (p.alpha < 0.0) {
    p.alpha = 0.0;
    p.beta = std::max(0.0, sxy / sxx);
  } else if (p.beta < 0.0) {
    p.beta = 0.0;
    p.alpha = std::max(0.0, suy / suu);
  }
  return p;
}

}  // namespace gradzip::comm
