// Implements the controller's link estimation (controller/Controller.h): β at
// start-up from the first steps' collectives (settleBeta), β from
// the running plan's collectives, the smallest over ranks, and a decision's
// refit of α and β (least squares over the observed collectives, a latency
// probe, the full probe, or the bandwidth soundings while the running plan is
// latency-bound).
#include "controller/Controller.h"

#include "controller/ControllerDecision.h"
#include "controller/ControllerDetail.h"
#include "comm/NetworkProbe.h"
#include "controller/BandwidthSounding.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h, controller/ControllerDecision.h

void Controller::settleBeta(int64_t step) {
  const auto t0 = Clock::now();
  betaPending_ = false;
  std::string from;
  if (sparseSoundBytes_ > 0) {
    // sparse_start: the steps' collectives are latency-bound; timed
    // all-reduces sized at start() give β (the fastest of them: a busy host
    // only slows one down), the lowest over the ranks as below.
    double fastest = INFINITY;
    for (int i = 0; i < kSparseSoundings; ++i) fastest = std::min(fastest, timedAllReduce(sparseSoundBytes_));
    net_.beta = minOverRanks(BandwidthSounding::betaOf(fastest, sparseSoundBytes_, comm_.size(), net_.alpha));
    from = fmt::format("{} all-reduces of {} KB (sparse start), the fastest {:.3f} s", kSparseSoundings,
                       sparseSoundBytes_ / 1024, fastest);
    sparseSoundBytes_ = 0;
  } else {
    const auto betas = usableBetas(lastSamples_, net_.alpha);
    const double observed = minOverRanks(int64_t(betas.size()) >= kStartBetaSteps
                                             ? *std::min_element(betas.begin(), betas.end())
                                             : INFINITY);
    if (std::isfinite(observed)) {
      net_.beta = observed;
      from = fmt::format("the collectives of the {} steps since start", observedSteps_);
    } else {
      net_ = comm::probe(comm_, opts_.probe);
      from = "the probe (the first steps' collectives were too close to their latency term to give β)";
    }
  }
  const double seconds = since(t0);
  spdlog::info("controller: step {}: α = {:.1f} µs, bandwidth {:.1f} Mbit/s (β from {}) in {:.2f} s", step,
               net_.alpha * 1e6, comm::bandwidthBitsPerSec(net_) / 1e6, from, seconds);
  writeDecision(nlohmann::json{{"step", step},
                               {"event", "beta"},
                               {"alpha", net_.alpha},
                               {"beta", net_.beta},
                               {"from", from},
                               {"seconds", seconds}}
                    .dump());
}

double Controller::minOverRanks(double value) {
  auto t = torch::full({1}, value, torch::kDouble);
  comm_.allReduce(t, comm::ReduceOp::Min).wait();
  return t.item<double>();
}

double Controller::observedBetaOfRanks() {
  if (betaSteps_ == 0) return minOverRanks(observedBeta(lastSamples_, net_.alpha));
  // A sharp change (afterStep): only the collectives of its betaSteps_ steps
  // see the new link; most of them must be well above their latency term.
  const size_t n = std::min(lastSamples_.size(), size_t(betaSteps_) * large_.size());
  const std::vector<comm::AlphaBetaSample> since(lastSamples_.end() - std::ptrdiff_t(n), lastSamples_.end());
  return minOverRanks(observedBeta(since, net_.alpha, n / 2 + 1));
}

bool Controller::adoptObservedBeta(double margin) {
  const double observed = observedBetaOfRanks();
  if (comm_.rank() != 0 || !std::isfinite(observed)) return false;
  if (!(observed > net_.beta * (1 + margin))) return false;
  net_.beta = observed;
  return true;
}

void Controller::refit(Decision& d) {
  const int n = comm_.size();
  // α, β when the network moved: the robust fit of the collectives observed
  // since the drift began where they identify both (several bucket sizes or
  // collectives); otherwise (one plan, one bucket: all observations share
  // their coefficients) a fresh probe, which every rank joins.
  // While the running plan is latency-bound its collectives say nothing about
  // β (they fit in a token bucket's burst; β from them would be their latency
  // noise), and the bandwidth soundings watch the link instead
  // (controller/BandwidthSounding.h). At a network-type decision β is measured
  // afresh: an all-reduce sized for the link the latest sounding saw (its
  // effective β, latency included: a bound that errs towards a slow link and
  // a small sounding), then, while one finds the link more than twice as fast
  // as its size assumed, a bigger one, up to 3. β is the last one's (Table I
  // ring cost). Other decisions keep β. α stays. No probe, no β from the
  // collectives.
  d.bySoundings = broadcastInt(comm_.rank() == 0 && latencyBound_ && sounding_.hasReference() ? 1 : 0) != 0;
  if (d.bySoundings && !d.networkTrigger) {
    d.rec["refit"] = "none: β kept (the running plan is latency-bound; the soundings watch the link)";
  } else if (d.bySoundings) {
    d.rec["alpha_before"] = net_.alpha;
    d.rec["beta_before"] = net_.beta;
    const double window = recent_.empty() ? 0.0 : double(opts_.soundEvery) * recentStep_ / double(recent_.size());
    double estimate = BandwidthSounding::betaOf(sounding_.latest(), BandwidthSounding::periodicBytes(n), n, 0.0);
    double beta = net_.beta;
    int64_t last = 0;
    auto& rounds = d.rec["soundings"] = nlohmann::json::array();
    for (int round = 0; round < 3; ++round) {
      int64_t bytes = 0;
      if (comm_.rank() == 0) {
        const int64_t want = BandwidthSounding::bytesFor(opts_.soundShare, window, estimate, n);
        bytes = last == 0 || want > 2 * last ? want : 0;
      }
      bytes = broadcastInt(bytes);
      if (bytes == 0) break;
      const double seconds = timedAllReduce(bytes);
      if (comm_.rank() == 0) {
        beta = BandwidthSounding::betaOf(seconds, bytes, n, net_.alpha);
        estimate = BandwidthSounding::betaOf(seconds, bytes, n, 0.0);
        rounds.push_back({{"bytes", bytes}, {"seconds", seconds}, {"beta", beta}});
      }
      last = bytes;
    }
    if (comm_.rank() == 0) {
      d.rec["sounding_change"] = sounding_.confirmedChange();
      d.networkChanged = std::abs(beta / net_.beta - 1) > opts_.networkDrift;
      net_.beta = beta;
    }
    d.rec["refit"] = "β from the bandwidth soundings (the running plan is latency-bound)";
  } else if (d.networkTrigger) {
    const auto before = net_;
    std::optional<comm::NetworkParams> fit;
    // After a sharp change the fitter still holds collectives of the old link.
    if (comm_.rank() == 0 && betaSteps_ == 0) fit = fitter_.fit();
    if (broadcastInt(fit && fit->beta > 0 ? 1 : 0)) {
      if (comm_.rank() == 0) net_ = *fit;
      d.rec["refit"] = "least squares over the observed collectives";
      if (adoptObservedBeta(opts_.networkDrift))
        d.rec["refit"] = "least squares for α; β from the running plan's latest collectives (slower than the fit)";
    } else {
      // α from the round trips of a tiny message (comm::probeLatency), β
      // from the running plan's collectives since the change (observedBeta:
      // the median of those well above their latency term). A token-bucket
      // shaper lets a probe's messages through at line rate up to its burst,
      // so the collectives are the better measure of β anyway; the full
      // probe (up to budget_seconds) only where they give none. Not a fit of
      // 1 and 4 KB round trips: the shaper rate-limits those once its bucket
      // is empty (controller_ablation.md, "α from a tiny message at network
      // decisions").
      net_.alpha = comm::probeLatency(comm_, quickProbe(opts_.probe));
      const double observed = observedBetaOfRanks();
      if (std::isfinite(observed)) {
        net_.beta = observed;
        d.rec["refit"] = "latency probe for α; β from the observed collectives";
      } else {
        net_ = comm::probe(comm_, opts_.probe);
        const double probed = net_.beta;
        d.rec["refit"] = "probe";
        // The probe can see a fast link that the running plan's collectives
        // do not (the burst): β from those, when slower, wins.
        if (adoptObservedBeta(0.0)) {
          d.rec["beta_probe"] = probed;
          d.rec["refit"] = "probe for α; β from the observed collectives (slower than the probe saw)";
        }
      }
    }
    d.rec["alpha_before"] = before.alpha;
    d.rec["beta_before"] = before.beta;
    d.networkChanged = std::abs(net_.beta / before.beta - 1) > opts_.networkDrift;
  } else {
    // Any other decision: the running plan's latest collectives must not be
    // slower than the model says by more than the network threshold. A link
    // that slowed just before a gain-triggered decision (or while the network
    // detector was calibrating) would otherwise steer exploration to dense
    // plans, and the references taken afterwards would hide the change.
    const double beta = net_.beta;
    if (adoptObservedBeta(opts_.networkDrift)) {
      d.rec["beta_before"] = beta;
      d.rec["refit"] = "β from the running plan's observed collectives (slower than the model by more than network_drift)";
    }
  }
  fitter_.clear();
  if (betaSteps_ > 0) d.rec["beta_steps"] = betaSteps_;
  d.rec["refit_seconds"] = since(d.started);  // β's settling included
  d.rec["alpha"] = net_.alpha;
  d.rec["beta"] = net_.beta;
  d.rec["bandwidth_mbit"] = comm::bandwidthBitsPerSec(net_) / 1e6;
}

}  // namespace gradzip::trainer
