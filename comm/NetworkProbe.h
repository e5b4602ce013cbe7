// The network probe: measures α (latency, seconds per message) and β (seconds
// per byte) by ping-pong between rank 0 and a peer at several message sizes
// (1 KiB .. 4 MiB by default). For each size the half round-trip time is
// t(M) = α + M·β (flexible-communication paper, Table I); the medians over the
// repetitions are fitted by weighted least squares (comm/AlphaBetaFit.h) with
// weight 1/t (timing error growing like √t; see probePeer). Should
// the fit land on α = 0 (a token-bucket shaper's free burst) or β = 0 (a badly
// loaded host), the probe bounds the zero term from the smallest or largest
// size instead and warns. Rank 0 decides and broadcasts the result, so every
// rank holds identical numbers. The injected send delay of the communicator
// (latency emulation) is part of what is measured: one delay per message, so
// the probed α is the delay the engine's collectives pay per round too
// (Communicator::setSendDelay).
//
// Cost is bounded: rank 0 predicts each size's round trip from what it has
// measured so far and stops before the larger sizes once they would overrun
// budgetSeconds (at least two sizes are always measured), and no further batch
// of repeats starts once the budget is spent, so a link that slows down while
// it is probed (a rate schedule) costs at most a round trip over budget.
#pragma once

#include "comm/AlphaBetaFit.h"
#include "comm/Communicator.h"
#include "util/Yaml.h"

#include <cstdint>
#include <vector>

namespace gradzip::comm {

struct ProbeOptions {
  // Message sizes in bytes, probed in ascending order.
  std::vector<int64_t> sizes = {1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
  int warmup = 1;       // untimed round trips per size (connection set-up, TCP window)
  int minRepeats = 3;   // timed round trips per size, at least ...
  int maxRepeats = 30;  // ... and at most
  double budgetSeconds = 4.0;
  // Probe every rank r > 0 against rank 0 (one after another) and report the
  // median α and the largest β (the bottleneck); otherwise only ranks 0 and 1.
  bool allPeers = false;

  static ProbeOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& n) const;
};

struct ProbeResult {
  NetworkParams params;  // identical on every rank
  // Rank 0 only (empty elsewhere): per measured size (of the last peer),
  // the median half round-trip time and the number of timed round trips.
  std::vector<int64_t> sizes;
  std::vector<double> medianSeconds;
  std::vector<int> repeats;
  double probeSeconds = 0.0;  // wall time of the probe on this rank
};

// Collective: every rank must call it with the same options. Needs size() >= 2
// (UserError otherwise). Throws CommError if a peer fails.
ProbeResult probeNetwork(Communicator& comm, const ProbeOptions& opts = {});
// probeNetwork(...).params.
NetworkParams probe(Communicator& comm, const ProbeOptions& opts = {});

// α alone, for a caller that has β from elsewhere (a network decision's
// running-plan collectives): the median half round trip of
// kLatencyProbeBytes-byte messages between rank 0 and peer 1 (with allPeers,
// the median over the peers), opts.warmup untimed and up to opts.maxRepeats
// timed round trips within opts.budgetSeconds. One size instead of a fit of
// two: on a token-bucket shaped link the two sizes' transfers are
// rate-limited once the bucket is empty, which makes finding α slow on a slow
// link (experiments/results/controller.md, "Notes to the table", note 23); an
// 8-byte message passes in a few bytes' time at any rate, so its half round
// trip is the latency term itself (a slight overestimate by that transfer).
// Collective (every rank calls it with the same options); size() >= 2
// (UserError otherwise); the result is identical on every rank.
inline constexpr int64_t kLatencyProbeBytes = 8;
double probeLatency(Communicator& comm, const ProbeOptions& opts = {});

}  // namespace gradzip::comm
