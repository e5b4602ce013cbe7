// Implements comm/LinkFitter.h: group medians, then bisquare IRLS over them.
#include "comm/LinkFitter.h"

#include "util/Error.h"
#include "util/Median.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

namespace gradzip::comm {

LinkFitter::LinkFitter(LinkFitterOptions opts) : opts_(opts) {
  GZ_CHECK(opts_.window >= 2, "link fitter: window must hold at least 2 samples, got {}", opts_.window);
  GZ_CHECK(opts_.bisquareC > 0, "link fitter: bisquare constant must be positive, got {}", opts_.bisquareC);
}

void LinkFitter::add(const AlphaBetaSample& s) {
  if (!(s.seconds > 0.0) || !std::isfinite(s.seconds) || s.betaBytes < 0.0 || s.alphaCount < 0.0) return;
  samples_.push_back(s);
  while (samples_.size() > opts_.window) samples_.pop_front();
}

std::optional<NetworkParams> LinkFitter::fit() const {
  // 1. Median per distinct (alphaCount, betaBytes).
  std::map<std::pair<double, double>, std::vector<double>> groups;
  for (const auto& s : samples_) groups[{s.alphaCount, s.betaBytes}].push_back(s.seconds);
  std::vector<AlphaBetaSample> pts;
  for (auto& [key, secs] : groups) pts.push_back({key.first, key.second, median(secs)});

  // 2. Bisquare IRLS on relative residuals, starting from the plain fit.
  // Relative residuals (weight 1/y²) times the bisquare weight.
  std::vector<double> w(pts.size());
  for (size_t i = 0; i < pts.size(); ++i) w[i] = 1.0 / (pts[i].seconds * pts[i].seconds);
  auto fitted = fitAlphaBeta(pts, w);
  if (!fitted) return std::nullopt;
  for (int it = 0; it < opts_.irlsIterations; ++it) {
    std::vector<double> r(pts.size());
    for (size_t i = 0; i < pts.size(); ++i) {
      const double pred = pts[i].alphaCount * fitted->alpha + pts[i].betaBytes * fitted->beta;
      r[i] = (pts[i].seconds - pred) / pts[i].seconds;
    }
    std::vector<double> absR(r.size());
    std::transform(r.begin(), r.end(), absR.begin(), [](double x) { return std::fabs(x); });
    // MAD scale (1.4826 makes it consistent for Gaussian noise); the floor keeps
    // an exact fit from dividing by zero.
    const double scale = std::max(1.4826 * median(absR), 1e-6);
    const double c = opts_.bisquareC * scale;
    for (size_t i = 0; i < pts.size(); ++i) {
      const double u = r[i] / c;
      w[i] = (std::fabs(u) < 1.0 ? (1 - u * u) * (1 - u * u) : 0.0) / (pts[i].seconds * pts[i].seconds);
    }
    auto next = fitAlphaBeta(pts, w);
    if (!next) break;  // too many rejected to identify both: keep the last fit
    const bool converged = std::fabs(next->alpha - fitted->alpha) <= 1e-9 * std::max(fitted->alpha, 1e-12) &&
                           std::fabs(next->beta - fitted->beta) <= 1e-9 * std::max(fitted->beta, 1e-18);
    fitted = next;
    if (converged) break;
  }
  return fitted;
}

bool LinkFitter::betaChanged(const NetworkParams& reference, const NetworkParams& current, double relThreshold) {
  GZ_CHECK(reference.beta > 0.0, "link fitter: the reference β must be positive, got {}", reference.beta);
  GZ_CHECK(relThreshold >= 0.0, "link fitter: threshold must be >= 0, got {}", relThreshold);
  return std::fabs(current.beta / reference.beta - 1.0) > relThreshold;
}

bool LinkFitter::betaChanged(const NetworkParams& reference, double relThreshold) const {
  auto f = fit();
  return f && betaChanged(reference, *f, relThreshold);
}

}  // namespace gradzip::comm
