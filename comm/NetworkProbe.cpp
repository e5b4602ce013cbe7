// Implements comm/NetworkProbe.h. Protocol between rank 0 and a peer: rank 0
// sends a control message (bytes, count) and then `count` ping-pongs of `bytes`
// follow, the peer echoing each message back; bytes = 0 ends the peer's loop.
// Each size runs as two batches: the warm-up round trips (untimed, but the last
// one predicts the round trip for choosing the repeat count) and the timed ones.
#include "comm/NetworkProbe.h"

#include "comm/AlphaBetaFit.h"
#include "util/Error.h"
#include "util/Median.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace gradzip::comm {

namespace {

constexpr int kCtrlTag = 0x6750;
constexpr int kDataTag = 0x6751;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Rank 0: up to `count` round trips of `buf` with `peer`; returns each one's
// seconds. They go in batches of 1, 2, 4, ... announced to the peer one at a
// time, and no new batch starts after `deadline`: a link that slows down
// while it is probed (a rate schedule) must not turn repeats sized for the
// fast link into minutes.
std::vector<double> pingPong(Communicator& c, int peer, at::Tensor& buf, at::Tensor& back, int count,
                             Clock::time_point deadline = Clock::time_point::max()) {
  std::vector<double> rtt;
  for (int batch = 1; static_cast<int>(rtt.size()) < count; batch *= 2) {
    if (!rtt.empty() && Clock::now() > deadline) break;
    const int n = std::min(batch, count - static_cast<int>(rtt.size()));
    at::Tensor ctrl = at::tensor({buf.numel(), static_cast<int64_t>(n)}, at::kLong);
    c.send(ctrl, peer, kCtrlTag).wait();
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      Work s = c.send(buf, peer, kDataTag);
      c.recv(back, peer, kDataTag).wait();
      s.wait();
      rtt.push_back(secondsSince(t0));
    }
  }
  return rtt;
}

// The peer's side: echo until rank 0 sends bytes = 0.
void echoLoop(Communicator& c) {
  at::Tensor ctrl = at::empty({2}, at::kLong);
  at::Tensor buf;
  while (true) {
    c.recv(ctrl, 0, kCtrlTag).wait();
    const int64_t bytes = ctrl[0].item<int64_t>();
    const int64_t count = ctrl[1].item<int64_t>();
    if (bytes == 0) return;
    if (!buf.defined() || buf.numel() != bytes) buf = at::empty({bytes}, at::kByte);
    for (int64_t i = 0; i < count; ++i) {
      c.recv(buf, 0, kDataTag).wait();
      c.send(buf, 0, kDataTag).wait();
    }
  }
}

// The roles every probe shares: rank 0 runs perPeer(peer, budget) against
// peers 1 .. last (every rank with allPeers, else rank 1) one after another,
// each with an equal share of opts.budgetSeconds, and then ends that peer's
// echo loop (bytes = 0); those peers echo; the other ranks wait for the
// broadcast that follows (broadcastFromRankZero).
template <class PerPeer>
void fromRankZeroToPeers(Communicator& c, const ProbeOptions& o, PerPeer perPeer) {
  const int last = o.allPeers ? c.size() - 1 : 1;
  if (c.rank() == 0) {
    for (int peer = 1; peer <= last; ++peer) {
      perPeer(peer, o.budgetSeconds / last);
      c.send(at::tensor({int64_t{0}, int64_t{0}}, at::kLong), peer, kCtrlTag).wait();
    }
  } else if (c.rank() <= last) {
    echoLoop(c);
  }
}

// Rank 0 decides; every rank returns its numbers, bit for bit.
std::vector<double> broadcastFromRankZero(Communicator& c, const std::vector<double>& values) {
  at::Tensor t = at::tensor(values, at::kDouble);
  c.broadcast(t, 0).wait();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

// Rank 0's measurement against one peer within `budget` seconds.
ProbeResult probePeer(Communicator& c, int peer, const ProbeOptions& o, double budget) {
  ProbeResult res;
  std::vector<AlphaBetaSample> pts;
  std::vector<double> weights;
  const auto start = Clock::now();
  for (size_t i = 0; i < o.sizes.size(); ++i) {
    const int64_t m = o.sizes[i];
    // Round trip predicted from what is known: the fit once two sizes are in,
    // else the last size scaled by the byte ratio (an overestimate).
    double predicted = 0.0;
    if (pts.size() >= 2) {
      if (auto f = fitAlphaBeta(pts)) predicted = 2.0 * pointToPointSeconds(*f, static_cast<double>(m));
    } else if (pts.size() == 1) {
      predicted = 2.0 * pts.back().seconds * std::max(1.0, static_cast<double>(m) / pts.back().betaBytes);
    }
    const double remaining = budget - secondsSince(start);
    if (pts.size() >= 2 && predicted * (o.warmup + o.minRepeats) > remaining) {
      spdlog::debug("probe: skipping sizes from {} B (predicted round trip {:.3f} s, {:.2f} s left)", m, predicted,
                    remaining);
      break;
    }
    at::Tensor buf = at::zeros({m}, at::kByte);
    at::Tensor back = at::empty({m}, at::kByte);
    if (o.warmup > 0) predicted = pingPong(c, peer, buf, back, o.warmup).back();
    // An equal share of the remaining budget for this and every later size.
    const double share = (budget - secondsSince(start)) / static_cast<double>(o.sizes.size() - i);
    int repeats = o.minRepeats;
    if (predicted > 0.0)
      repeats = static_cast<int>(std::clamp(share / predicted, static_cast<double>(o.minRepeats),
                                            static_cast<double>(o.maxRepeats)));
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget));
    std::vector<double> rtt = pingPong(c, peer, buf, back, repeats, deadline);
    for (double& x : rtt) x *= 0.5;  // half round trips: one message each way
    const double half = median(rtt);
    pts.push_back({1.0, static_cast<double>(m), half});
    // Weight 1/t: timing error taken as growing like √t. Relative weights
    // (1/t²) let the smallest sizes, where host scheduling delays dominate,
    // tilt β; plain weights ignore α's sizes. The repeat count n does not enter:
    // those delays are a bias that more repeats do not average away.
    weights.push_back(1.0 / half);
    res.sizes.push_back(m);
    res.medianSeconds.push_back(half);
    res.repeats.push_back(static_cast<int>(rtt.size()));
    spdlog::debug("probe: peer {} size {} B: median half round trip {:.1f} us (min {:.1f}) over {} repeats", peer, m,
                  half * 1e6, 1e6 * *std::min_element(rtt.begin(), rtt.end()), repeats);
  }
  auto f = fitAlphaBeta(pts, weights);
  GZ_ASSERT(f.has_value(), "probe measured {} sizes but the fit is not identifiable", pts.size());
  res.params = *f;
  // On the boundary, report what the model still bounds instead of a zero:
  // β <= t(M_max)/M_max, and α = t(M_min) − M_min·β (or t(M_min) itself, an
  // upper bound, when that is not positive). α = 0 arises when a token-bucket
  // shaper lets its bucket through for free (t ≈ (M − B)·β: negative
  // intercept); β = 0 when a badly loaded host's scheduling delays swamp the
  // transfer times. Flagged, and conservative for the cost model.
  if (res.params.alpha <= 0.0 || res.params.beta <= 0.0) {
    spdlog::warn("probe: the fit is on its boundary (alpha {:.3g} s, beta {:.3g} s/B): the half round trips are "
                 "not affine in the message size (token-bucket burst or a loaded host); bounding the zero term",
                 res.params.alpha, res.params.beta);
    if (res.params.beta <= 0.0) res.params.beta = pts.back().seconds / pts.back().betaBytes;
    if (res.params.alpha <= 0.0) {
      const double rest = pts.front().seconds - pts.front().betaBytes * res.params.beta;
      res.params.alpha = rest > 0.0 ? rest : pts.front().seconds;
    }
  }
  return res;
}

}  // namespace

ProbeOptions ProbeOptions::fromYaml(YamlReader& r) {
  ProbeOptions o;
  o.sizes = r.getIntList("sizes", o.sizes);
  o.warmup = static_cast<int>(r.getInt("warmup", o.warmup, 0, 100));
  o.minRepeats = static_cast<int>(r.getInt("min_repeats", o.minRepeats, 1, 10000));
  o.maxRepeats = static_cast<int>(r.getInt("max_repeats", o.maxRepeats, 1, 10000));
  o.budgetSeconds = r.getDouble("budget_seconds", o.budgetSeconds, 0.0, 3600.0);
  o.allPeers = r.getBool("all_peers", o.allPeers);
  if (o.maxRepeats < o.minRepeats) r.fail("max_repeats", fmt::format("must be >= min_repeats ({})", o.minRepeats));
  if (o.sizes.size() < 2) r.fail("sizes", "needs at least two message sizes to separate α from β");
  for (size_t i = 0; i < o.sizes.size(); ++i)
    if (o.sizes[i] < 1 || (i > 0 && o.sizes[i] <= o.sizes[i - 1]))
      r.fail("sizes", "message sizes must be positive and strictly increasing");
  r.finish();
  return o;
}

void ProbeOptions::toYaml(YAML::Node& n) const {
  for (auto s : sizes) n["sizes"].push_back(s);
  n["warmup"] = warmup;
  n["min_repeats"] = minRepeats;
  n["max_repeats"] = maxRepeats;
  n["budget_seconds"] = budgetSeconds;
  n["all_peers"] = allPeers;
}

ProbeResult probeNetwork(Communicator& comm, const ProbeOptions& opts) {
  GZ_CHECK(comm.size() >= 2, "the network probe needs at least 2 ranks, this group has {}", comm.size());
  GZ_CHECK(opts.sizes.size() >= 2, "the network probe needs at least two message sizes, got {}", opts.sizes.size());
  GZ_CHECK(opts.minRepeats >= 1 && opts.maxRepeats >= opts.minRepeats,
           "the network probe needs 1 <= min_repeats <= max_repeats, got {} and {}", opts.minRepeats,
           opts.maxRepeats);
  for (size_t i = 0; i < opts.sizes.size(); ++i)
    GZ_CHECK(opts.sizes[i] >= 1 && (i == 0 || opts.sizes[i] > opts.sizes[i - 1]),
             "the network probe's message sizes must be positive and strictly increasing");
  const auto start = Clock::now();
  ProbeResult res;
  std::vector<double> alphas;
  double beta = 0.0;
  fromRankZeroToPeers(comm, opts, [&](int peer, double budget) {
    ProbeResult r = probePeer(comm, peer, opts, budget);
    alphas.push_back(r.params.alpha);
    beta = std::max(beta, r.params.beta);
    res.sizes = std::move(r.sizes);
    res.medianSeconds = std::move(r.medianSeconds);
    res.repeats = std::move(r.repeats);
  });
  const auto p = broadcastFromRankZero(comm, {alphas.empty() ? 0.0 : median(alphas), beta});
  res.params = {p[0], p[1]};
  res.probeSeconds = secondsSince(start);
  if (comm.rank() == 0)
    spdlog::info("probe: alpha {:.1f} us, beta {:.4g} s/B ({:.1f} Mbit/s) from {} sizes in {:.2f} s",
                 res.params.alpha * 1e6, res.params.beta, bandwidthBitsPerSec(res.params) / 1e6, res.sizes.size(),
                 res.probeSeconds);
  return res;
}

NetworkParams probe(Communicator& comm, const ProbeOptions& opts) { return probeNetwork(comm, opts).params; }

double probeLatency(Communicator& comm, const ProbeOptions& opts) {
  GZ_CHECK(comm.size() >= 2, "the latency probe needs at least 2 ranks, this group has {}", comm.size());
  GZ_CHECK(opts.maxRepeats >= 1, "the latency probe needs max_repeats >= 1, got {}", opts.maxRepeats);
  const auto start = Clock::now();
  std::vector<double> alphas;
  at::Tensor buf = at::zeros({kLatencyProbeBytes}, at::kByte);
  at::Tensor back = at::empty({kLatencyProbeBytes}, at::kByte);
  fromRankZeroToPeers(comm, opts, [&](int peer, double budget) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget));
    if (opts.warmup > 0) pingPong(comm, peer, buf, back, opts.warmup, deadline);
    alphas.push_back(0.5 * median(pingPong(comm, peer, buf, back, opts.maxRepeats, deadline)));
  });
  const double alpha = broadcastFromRankZero(comm, {alphas.empty() ? 0.0 : median(alphas)})[0];
  if (comm.rank() == 0)
    spdlog::info("probe: alpha {:.1f} us from {}-byte round trips in {:.3f} s", alpha * 1e6, kLatencyProbeBytes,
                 secondsSince(start));
  return alpha;
}

}  // namespace gradzip::comm
