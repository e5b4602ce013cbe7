// The controller's model of the link: latency α and inverse bandwidth β
// (flexible-communication paper Table I), as the controller's predictions use
// them. It owns every way they are measured: the short start-up probe (α),
// β from the first steps' collectives or, after a sparse start, from timed
// all-reduces (settleBeta), the running plan's observed collectives (a robust
// α-β fit and a window of the latest, observe()), a decision's refit, and the
// bandwidth soundings that watch the link while the running plan is
// latency-bound (controller/BandwidthSounding.h).
//
// Contract: the methods marked collective are called by every rank at the
// same step, in the same order. Rank 0's α and β are the ones that decide
// (after a refit from the fit or the soundings the other ranks' may differ;
// they use them for nothing that must agree). Records go to the decision log.
#pragma once

#include "comm/CostModel.h"
#include "comm/LinkFitter.h"
#include "controller/BandwidthSounding.h"
#include "controller/ControllerOptions.h"

#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

#include <cstdint>
#include <deque>
#include <string>

namespace gradzip::comm {
class Communicator;
}

namespace gradzip::trainer {

class DecisionLog;

class LinkEstimator {
 public:
  // largeBuckets: how many buckets the controller decides for (each step
  // observes one collective of each).
  LinkEstimator(const ControllerOptions& opts, comm::Communicator& comm, DecisionLog& log, size_t largeBuckets);

  const comm::NetworkParams& network() const { return net_; }

  // --- Start-up.
  // Collective: α from a short probe; β is pending until settleBeta (the
  // initial plan's collectives measure the link for free). Returns the
  // probe's α and its burst-optimistic β, for sizing a sparse start.
  comm::NetworkParams probeAlpha();
  // sparse_start_above: settleBeta times all-reduces of `bytes` (the same on
  // every rank; 0: off, β from the steps' collectives).
  void setSparseStart(int64_t bytes) { sparseSoundBytes_ = bytes; }
  int64_t sparseStartBytes() const { return sparseSoundBytes_; }
  bool betaPending() const { return betaPending_; }
  // Collective, once, kStartBetaSteps steps after probeAlpha: β from those
  // steps' collectives, the fastest over them and over ranks (the first
  // steps carry start-up waits, and a slow outlier in two samples would be
  // half the median), from the sparse start's timed all-reduces, or the full
  // probe (α and β) where fewer than kStartBetaSteps were well above their
  // latency term. `observedSteps`: steps since start, for the record. Logs
  // the seconds it took.
  void settleBeta(int64_t step, int64_t observedSteps);

  // --- Each step, every rank.
  // One collective of the running plan with its coefficients and seconds.
  void observe(const comm::AlphaBetaSample& sample);
  // The network detector saw a drift begin: the refit at the next decision
  // fits only the collectives from here on.
  void restartFit() { fitter_.clear(); }
  // A new plan whose collectives move `betaBytes` a step over the large
  // buckets: latency-bound (less than half a periodic sounding) or not.
  void planApplied(double betaBytes);
  bool latencyBound() const { return latencyBound_; }
  // A decision's fresh measurements: the soundings start over, their first
  // held against the time the current α and β predict for it.
  void resetSoundings();

  // --- A decision.
  struct Refit {
    bool bySoundings = false;  // β from the bandwidth soundings (the running plan is latency-bound)
    bool changed = false;      // β moved by more than network_drift (rank 0's; refit broadcasts nothing of it)
  };
  // Collective: α and β when the network moved (networkTrigger: network,
  // step-time or sounding), or β when the running plan's collectives show
  // the link slower than the model; logged in rec. `window`: sound_every of
  // the running plan's mean steps (sizes the soundings; 0 without steps);
  // `betaSteps` > 0: a sharp change, β from the collectives of those steps
  // alone.
  Refit refit(bool networkTrigger, double window, int64_t betaSteps, nlohmann::json& rec);

  // --- Bandwidth soundings.
  // Rank 0, at a trigger check once a decision has run, with the running
  // plan's mean step so far (> 0): the bytes of a sounding due now, or 0
  // (none due, the plan is not latency-bound, or soundings are off).
  int64_t soundingDue(int64_t step, double meanStep) const;
  // Collective: one timed all-reduce of `bytes`; rank 0 judges it and logs
  // it with `plan` (the running plan's key).
  void sound(int64_t step, int64_t bytes, const std::string& plan);
  // Rank 0: two soundings in a row confirmed a change since the last reset.
  bool soundTriggered() const { return soundTriggered_; }

 private:
  // Every rank: β from the running plan's latest collectives, the smallest
  // over ranks (observedBetaOfRanks), which rank 0 then adopts when slower
  // than the model by more than `margin` (relative); true (on rank 0) if it
  // did.
  bool adoptObservedBeta(double margin, int64_t betaSteps);
  // Collective: observedBeta of the running plan's latest collectives, the
  // smallest over ranks: the last rank to reach a collective sees its wire
  // time, the others also wait for that rank, which on an oversubscribed
  // host is most of the time. +infinity where too few of them were well
  // above their latency term. With betaSteps > 0 (a sharp change): the
  // collectives of those steps alone, most of them well above their latency
  // term.
  double observedBetaOfRanks(int64_t betaSteps);
  // Collective: the seconds one all-reduce of `bytes` (float32 zeros) takes.
  double timedAllReduce(int64_t bytes);

  const ControllerOptions& opts_;
  comm::Communicator& comm_;
  DecisionLog& log_;
  size_t largeBuckets_;
  comm::NetworkParams net_;
  comm::LinkFitter fitter_;
  std::deque<comm::AlphaBetaSample> lastSamples_;  // the last observed collectives with their coefficients
  bool betaPending_ = false;                        // β not measured yet since probeAlpha (settleBeta)
  int64_t sparseSoundBytes_ = 0;
  bool latencyBound_ = false;
  // Soundings: rank 0 judges them and keeps the verdicts.
  BandwidthSounding sounding_;
  at::Tensor soundBuffer_;
  int64_t lastSound_ = -1;    // step of the last sounding on this plan (-1: none yet)
  bool soundAgain_ = false;   // the last sounding was suspect: confirm at the next check
  bool soundTriggered_ = false;
};

}  // namespace gradzip::trainer
