// Helpers shared by the controller and its parts (controller/Controller*.cpp,
// LinkEstimator.cpp, Triggers.cpp, Screening.cpp): wall-clock timing, the
// collectives of one number, the β estimate from observed collectives, the
// short probes, the statistical cost and statistics record of the decision
// log, and the controller's tuning constants. Internal to controller/.
#pragma once

#include "comm/Communicator.h"
#include "comm/NetworkProbe.h"
#include "controller/ControllerOptions.h"
#include "sync/CompressionStats.h"
#include "util/Median.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

namespace gradzip::trainer::detail {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Collective: rank 0's `value` on every rank.
inline int64_t broadcastInt(comm::Communicator& comm, int64_t value) {
  auto t = torch::full({1}, value, torch::kLong);
  comm.broadcast(t, 0).wait();
  return t.item<int64_t>();
}

// Collective: the smallest `value` over ranks.
inline double minOverRanks(comm::Communicator& comm, double value) {
  auto t = torch::full({1}, value, torch::kDouble);
  comm.allReduce(t, comm::ReduceOp::Min).wait();
  return t.item<double>();
}

// Single collective times on a shared host have heavy tails, and on a fast
// link they are mostly scheduling noise: the network detector and the β
// correction take the median of the last kRatioWindow observations.
constexpr size_t kRatioWindow = 9;

// β per observation (t − a·α)/m with the plan's coefficients (Table I), from
// the observations that took well over their latency term (an α-bound
// all-gather of a few hundred bytes would turn its latency noise into a bogus
// bandwidth).
template <typename Samples>
std::vector<double> usableBetas(const Samples& samples, double alpha) {
  std::vector<double> betas;
  for (const auto& o : samples)
    if (o.betaBytes > 0 && o.seconds >= 2 * o.alphaCount * alpha)
      betas.push_back(std::max(0.0, o.seconds - o.alphaCount * alpha) / o.betaBytes);
  return betas;
}

// Their median; +infinity with fewer than `atLeast` (half a window).
template <typename Samples>
double observedBeta(const Samples& samples, double alpha, size_t atLeast = kRatioWindow / 2 + 1) {
  const auto betas = usableBetas(samples, alpha);
  return betas.empty() || betas.size() < atLeast ? INFINITY : median(betas);
}

// Steps after Controller::start whose collectives give β (settleBeta): the
// median of two, the smallest count that is a measurement and not a guess.
constexpr int64_t kStartBetaSteps = 2;

// sparse_start_above: each of settleBeta's kSparseSoundings all-reduces is
// sized to take this long at the start-up probe's rate (at least
// BandwidthSounding::kMinBytes, past a token bucket's burst). The probe's β is
// optimistic (its 4 KB messages fit in the burst), so they take longer, yet
// far less than the dense steps they replace.
constexpr double kSparseSoundSeconds = 0.05;
constexpr int kSparseSoundings = 2;

// The short probes of start() (α and a burst-optimistic β from two small
// sizes, ~10 round trips each even at 50 ms of latency) and of a network
// decision (α alone, comm::probeLatency): at most 0.5 s.
inline comm::ProbeOptions quickProbe(comm::ProbeOptions o) {
  o.sizes = {1 << 10, 4 << 10};
  o.budgetSeconds = std::min(0.5, o.budgetSeconds);
  return o;
}

// Whether a settled network or step-time change is acted on `elapsed` steps
// after the last decision (Triggers::send). A change waits
// network_interval, times `backoff` (doubled by each false alarm, up to
// min_interval) so that a noisy detector is not acted on again and again. A
// severe or sharp slowdown (`strong`: the step's sync part up by kSevere of
// the step) is the link's once the last decision's references are measured
// steps, and is acted on at once while no false alarm came before it. After
// a false alarm it still waits network_interval, but not the backoff, which
// earlier false alarms may have raised far beyond a real change's horizon
// (controller_ablation.md, "The final controller on `schedule_c1`, its
// small-bucket copy and 10 Mbit/s").
inline bool actOnChange(bool strong, bool measuredRefs, int64_t elapsed, int64_t networkInterval, int64_t backoff) {
  if (strong && measuredRefs && backoff == 1) return true;
  return elapsed >= networkInterval * (strong ? 1 : backoff);
}

// opts.stat of `plan`'s statistics (statisticalCost), at least `floor`: its
// screened cost, where the statistics come from steps run before its
// error-feedback residual has built up (explored, or since the last
// decision); infinite without statistics.
inline double statCost(const ControllerOptions& opts, const CompressionStats& s, const Plan& plan,
                       double floor = 0) {
  if (!(s.inputSq > 0)) return INFINITY;
  return std::max(floor, statisticalCost(opts, plan, s.errorSq / s.inputSq, s.appliedSq / s.inputSq));
}

// vNMSE = ||x − y||² / ||x||² and gain = ||y||² / ||x||² (paper's E||g_c||² / E||g_e||²).
inline nlohmann::json statsJson(const CompressionStats& s) {
  const double in = s.inputSq > 0 ? s.inputSq : NAN;
  return {{"vnmse", s.errorSq / in}, {"gain", s.appliedSq / in}};
}

// --- The controller's tuning constants (controller/Controller*.cpp).
// Observations after a decision whose median becomes a detector's reference:
// the new plan's own level, not the model's (the α-β model of a ping-pong
// probe predicts c10d's collectives only up to a constant factor).
inline constexpr size_t kCalibration = 10;
inline constexpr int64_t kGainSettle = 50;  // steps on a plan before its gain becomes the reference
inline constexpr double kSmoothing = 0.1;  // weight of a new observation in the drift averages
inline constexpr size_t kRecentCap = 1000;  // steps kept since a decision (recent_)
// A drift only counts when it moves the communication time by at least
// kMinImpact of the step time: a network change the step does not feel is not
// worth re-deciding for (the window it is the median of: kRatioWindow,
// controller/ControllerDetail.h).
inline constexpr double kMinImpact = 0.10;
inline constexpr int64_t kPersist = int64_t(kRatioWindow / 2 + 1);  // steps a network change must persist (Triggers::send)
// A change that has raised the median step − compute by at least this share
// of the step the last decision measured is acted on at once (Triggers::send).
inline constexpr double kSevere = 0.30;
// A sharp change: in each of the last kSharpSteps steps step − compute has
// risen by kSevere of the step and the observed/predicted communication
// ratio by a factor 1 + 2·network_drift over its reference (against the
// medians of kRatioWindow, which move only after kRatioWindow/2 + 1 of
// them). Acted on at once (Triggers::send): each step of the wait is a step of the
// old plan on the slow link. The ratio keeps a host's hiccup out (slow steps
// whose collectives are no slower). 2, not 3: measured in
// experiments/results/controller_ablation.md, "Two sharp steps, and prompt
// slowdowns after a measured decision".
inline constexpr size_t kSharpSteps = 2;
// Steps between refreshes of the measuring geometry (refreshGeometry): a
// per-tensor pass over Adam's v̂, which moves slowly, so not every check.
inline constexpr int64_t kGeometryEvery = 5;
// The gradient noise scale's sample stream: seeded by this and the step.
inline constexpr uint64_t kNoiseSeed = 0x6e6f697365ULL;

// A trigger verdict (rank 0 broadcasts it; the next check acts on it).
enum Reason : int64_t { kNone = 0, kInitial = 1, kNetwork = 2, kGain = 3, kStepTime = 4, kSounding = 5 };
inline const char* reasonName(int64_t r) {
  switch (r) {
    case kInitial: return "initial";
    case kNetwork: return "network";
    case kGain: return "gain";
    case kStepTime: return "step_time";
    case kSounding: return "sounding";
    default: return "none";
  }
}

}  // namespace gradzip::trainer::detail
