// Implements controller/LinkEstimator.h: β at start-up from the first steps'
// collectives (settleBeta), β from the running plan's collectives, the
// smallest over ranks, a decision's refit of α and β (least squares over the
// observed collectives, a latency probe, the full probe, or the bandwidth
// soundings while the running plan is latency-bound), and the soundings.
#include "controller/LinkEstimator.h"

#include "comm/NetworkProbe.h"
#include "controller/ControllerDetail.h"
#include "controller/DecisionLog.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace gradzip::trainer {
using namespace detail;  // controller/ControllerDetail.h

LinkEstimator::LinkEstimator(const ControllerOptions& opts, comm::Communicator& comm, DecisionLog& log,
                             size_t largeBuckets)
    : opts_(opts), comm_(comm), log_(log), largeBuckets_(largeBuckets), sounding_(2 * opts.networkDrift) {}

comm::NetworkParams LinkEstimator::probeAlpha() {
  // α only: β from the first steps' collectives (settleBeta). The full
  // probe's megabyte round trips take seconds on a slow link; the initial
  // plan's collectives measure the link for free, and a token-bucket shaper
  // lets the probe's messages through at line rate up to its burst anyway.
  const comm::NetworkParams probed = comm::probe(comm_, quickProbe(opts_.probe));
  net_ = probed;
  net_.beta = NAN;
  betaPending_ = true;
  return probed;
}

void LinkEstimator::settleBeta(int64_t step, int64_t observedSteps) {
  const auto t0 = Clock::now();
  betaPending_ = false;
  std::string from;
  if (sparseSoundBytes_ > 0) {
    // sparse_start: the steps' collectives are latency-bound; timed
    // all-reduces sized at start() give β (the fastest of them: a busy host
    // only slows one down), the lowest over the ranks as below.
    double fastest = INFINITY;
    for (int i = 0; i < kSparseSoundings; ++i) fastest = std::min(fastest, timedAllReduce(sparseSoundBytes_));
    net_.beta = minOverRanks(comm_, BandwidthSounding::betaOf(fastest, sparseSoundBytes_, comm_.size(), net_.alpha));
    from = fmt::format("{} all-reduces of {} KB (sparse start), the fastest {:.3f} s", kSparseSoundings,
                       sparseSoundBytes_ / 1024, fastest);
    sparseSoundBytes_ = 0;
  } else {
    const auto betas = usableBetas(lastSamples_, net_.alpha);
    const double observed = minOverRanks(comm_, int64_t(betas.size()) >= kStartBetaSteps
                                                    ? *std::min_element(betas.begin(), betas.end())
                                                    : INFINITY);
    if (std::isfinite(observed)) {
      net_.beta = observed;
      from = fmt::format("the collectives of the {} steps since start", observedSteps);
    } else {
      net_ = comm::probe(comm_, opts_.probe);
      from = "the probe (the first steps' collectives were too close to their latency term to give β)";
    }
  }
  const double seconds = since(t0);
  spdlog::info("controller: step {}: α = {:.1f} µs, bandwidth {:.1f} Mbit/s (β from {}) in {:.2f} s", step,
               net_.alpha * 1e6, comm::bandwidthBitsPerSec(net_) / 1e6, from, seconds);
  log_.write({{"step", step}, {"event", "beta"}, {"alpha", net_.alpha}, {"beta", net_.beta}, {"from", from},
              {"seconds", seconds}});
}

void LinkEstimator::observe(const comm::AlphaBetaSample& sample) {
  fitter_.add(sample);
  lastSamples_.push_back(sample);
  if (lastSamples_.size() > kRatioWindow) lastSamples_.pop_front();
}

void LinkEstimator::planApplied(double betaBytes) {
  // Latency-bound: the plan's collectives move less than half a sounding a
  // step, so on a shaped link they may fit in the token bucket's burst and
  // not show its rate. Denser plans' collectives do, through the ratio
  // detector (which keeps watching latency-bound plans too).
  latencyBound_ = betaBytes < 0.5 * double(BandwidthSounding::periodicBytes(comm_.size()));
}

void LinkEstimator::resetSoundings() {
  // The time the model the plan was chosen under gives a sounding (none while
  // β is still being measured at the start): a first sounding much faster
  // than that finds a link that changed under the decision.
  const bool modelled = std::isfinite(net_.alpha) && std::isfinite(net_.beta) && net_.alpha >= 0 && net_.beta >= 0;
  sounding_.reset(modelled ? comm::ringAllReduceCost(double(BandwidthSounding::periodicBytes(comm_.size())),
                                                     comm_.size(), net_)
                           : 0.0);
  lastSound_ = -1;
  soundAgain_ = soundTriggered_ = false;
}

double LinkEstimator::observedBetaOfRanks(int64_t betaSteps) {
  if (betaSteps == 0) return minOverRanks(comm_, observedBeta(lastSamples_, net_.alpha));
  // A sharp change (Triggers): only the collectives of its betaSteps steps
  // see the new link; most of them must be well above their latency term.
  const size_t n = std::min(lastSamples_.size(), size_t(betaSteps) * largeBuckets_);
  const std::vector<comm::AlphaBetaSample> since(lastSamples_.end() - std::ptrdiff_t(n), lastSamples_.end());
  return minOverRanks(comm_, observedBeta(since, net_.alpha, n / 2 + 1));
}

bool LinkEstimator::adoptObservedBeta(double margin, int64_t betaSteps) {
  const double observed = observedBetaOfRanks(betaSteps);
  if (comm_.rank() != 0 || !std::isfinite(observed)) return false;
  if (!(observed > net_.beta * (1 + margin))) return false;
  net_.beta = observed;
  return true;
}

LinkEstimator::Refit LinkEstimator::refit(bool networkTrigger, double window, int64_t betaSteps,
                                          nlohmann::json& rec) {
  Refit out;
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
  out.bySoundings = broadcastInt(comm_, comm_.rank() == 0 && latencyBound_ && sounding_.hasReference() ? 1 : 0) != 0;
  if (out.bySoundings && !networkTrigger) {
    rec["refit"] = "none: β kept (the running plan is latency-bound; the soundings watch the link)";
  } else if (out.bySoundings) {
    rec["alpha_before"] = net_.alpha;
    rec["beta_before"] = net_.beta;
    double estimate = BandwidthSounding::betaOf(sounding_.latest(), BandwidthSounding::periodicBytes(n), n, 0.0);
    double beta = net_.beta;
    int64_t last = 0;
    auto& rounds = rec["soundings"] = nlohmann::json::array();
    for (int round = 0; round < 3; ++round) {
      int64_t bytes = 0;
      if (comm_.rank() == 0) {
        const int64_t want = BandwidthSounding::bytesFor(opts_.soundShare, window, estimate, n);
        bytes = last == 0 || want > 2 * last ? want : 0;
      }
      bytes = broadcastInt(comm_, bytes);
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
      rec["sounding_change"] = sounding_.confirmedChange();
      out.changed = std::abs(beta / net_.beta - 1) > opts_.networkDrift;
      net_.beta = beta;
    }
    rec["refit"] = "β from the bandwidth soundings (the running plan is latency-bound)";
  } else if (networkTrigger) {
    const auto before = net_;
    std::optional<comm::NetworkParams> fit;
    // After a sharp change the fitter still holds collectives of the old link.
    if (comm_.rank() == 0 && betaSteps == 0) fit = fitter_.fit();
    if (broadcastInt(comm_, fit && fit->beta > 0 ? 1 : 0)) {
      if (comm_.rank() == 0) net_ = *fit;
      rec["refit"] = "least squares over the observed collectives";
      if (adoptObservedBeta(opts_.networkDrift, betaSteps))
        rec["refit"] = "least squares for α; β from the running plan's latest collectives (slower than the fit)";
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
      const double observed = observedBetaOfRanks(betaSteps);
      if (std::isfinite(observed)) {
        net_.beta = observed;
        rec["refit"] = "latency probe for α; β from the observed collectives";
      } else {
        net_ = comm::probe(comm_, opts_.probe);
        const double probed = net_.beta;
        rec["refit"] = "probe";
        // The probe can see a fast link that the running plan's collectives
        // do not (the burst): β from those, when slower, wins.
        if (adoptObservedBeta(0.0, betaSteps)) {
          rec["beta_probe"] = probed;
          rec["refit"] = "probe for α; β from the observed collectives (slower than the probe saw)";
        }
      }
    }
    rec["alpha_before"] = before.alpha;
    rec["beta_before"] = before.beta;
    out.changed = std::abs(net_.beta / before.beta - 1) > opts_.networkDrift;
  } else {
    // Any other decision: the running plan's latest collectives must not be
    // slower than the model says by more than the network threshold. A link
    // that slowed just before a gain-triggered decision (or while the network
    // detector was calibrating) would otherwise steer exploration to dense
    // plans, and the references taken afterwards would hide the change.
    const double beta = net_.beta;
    if (adoptObservedBeta(opts_.networkDrift, betaSteps)) {
      rec["beta_before"] = beta;
      rec["refit"] = "β from the running plan's observed collectives (slower than the model by more than network_drift)";
    }
  }
  fitter_.clear();
  if (betaSteps > 0) rec["beta_steps"] = betaSteps;
  rec["alpha"] = net_.alpha;
  rec["beta"] = net_.beta;
  rec["bandwidth_mbit"] = comm::bandwidthBitsPerSec(net_) / 1e6;
  return out;
}

int64_t LinkEstimator::soundingDue(int64_t step, double meanStep) const {
  if (opts_.soundEvery <= 0 || !latencyBound_) return 0;
  const int64_t bytes = BandwidthSounding::periodicBytes(comm_.size());
  if (lastSound_ < 0 || soundAgain_) return bytes;
  // Every sound_every steps, or less often where a sounding would take more
  // than sound_share of the steps in between (a slow link, fast steps).
  const double interval = std::max(double(opts_.soundEvery), sounding_.latest() / (opts_.soundShare * meanStep));
  return double(step - lastSound_) >= interval ? bytes : 0;
}

double LinkEstimator::timedAllReduce(int64_t bytes) {
  // Zeros, which the sum keeps zero: the buffer is reused as it is.
  if (!soundBuffer_.defined() || soundBuffer_.numel() != bytes / 4) soundBuffer_ = torch::zeros({bytes / 4}, torch::kFloat);
  const auto t0 = Clock::now();
  comm_.allReduce(soundBuffer_).wait();
  return since(t0);
}

void LinkEstimator::sound(int64_t step, int64_t bytes, const std::string& plan) {
  const double seconds = timedAllReduce(bytes);
  if (comm_.rank() != 0) return;
  const double beta = BandwidthSounding::betaOf(seconds, bytes, comm_.size(), net_.alpha);
  const auto verdict = sounding_.add(seconds);
  lastSound_ = step;
  soundAgain_ = verdict == BandwidthSounding::Verdict::Suspect;
  soundTriggered_ = soundTriggered_ || verdict == BandwidthSounding::Verdict::Changed;
  static constexpr const char* kVerdicts[] = {"reference", "steady", "suspect", "changed"};
  log_.write({{"step", step},
              {"event", "sounding"},
              {"plan", plan},
              {"bytes", bytes},
              {"seconds", seconds},
              {"beta", beta},
              {"change", sounding_.change()},
              {"verdict", kVerdicts[int(verdict)]}});
}

}  // namespace gradzip::trainer
