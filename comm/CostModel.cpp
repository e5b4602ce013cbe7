// Implements comm/CostModel.h; every formula cites its row of Table I or its
// equation in the flexible-communication paper.
#include "comm/CostModel.h"

#include "util/Error.h"

#include <cmath>

namespace gradzip::comm {
namespace {

void checkArgs(const char* what, double bytes, int n, const NetworkParams& p) {
  GZ_CHECK(n >= 1, "{}: world size must be at least 1, got {}", what, n);
  GZ_CHECK(bytes >= 0, "{}: message size must be non-negative, got {}", what, bytes);
  GZ_CHECK(p.alpha >= 0 && p.beta >= 0, "{}: α and β must be non-negative, got α={} β={}", what, p.alpha, p.beta);
}

void checkCr(const char* what, double cr) {
  GZ_CHECK(cr > 0 && cr <= 1, "{}: compression ratio must be in (0, 1], got {}", what, cr);
}

double log2n(int n) { return std::log2(static_cast<double>(n)); }

}  // namespace

NetworkParams NetworkParams::fromLatencyAndGbps(double alphaSeconds, double gbps) {
  GZ_CHECK(alphaSeconds >= 0, "latency must be non-negative, got {} s", alphaSeconds);
  GZ_CHECK(gbps > 0, "bandwidth must be positive, got {} Gbit/s", gbps);
  return NetworkParams{alphaSeconds, 8.0 / (gbps * 1e9)};
}

double psCost(double bytes, int n, const NetworkParams& p) {
  checkArgs("psCost", bytes, n, p);
  if (n == 1) return 0.0;
  return 2 * p.alpha + 2.0 * (n - 1) * bytes * p.beta;  // Table I, PS (star)
}

double ringAllReduceCost(double bytes, int n, const NetworkParams& p) {
  checkArgs("ringAllReduceCost", bytes, n, p);
  if (n == 1) return 0.0;
  return 2.0 * (n - 1) * p.alpha + 2.0 * (n - 1) / n * bytes * p.beta;  // Table I, Ring-AR
}

double treeAllReduceCost(double bytes, int n, const NetworkParams& p) {
  checkArgs("treeAllReduceCost", bytes, n, p);
  return 2 * p.alpha * log2n(n) + 2 * log2n(n) * bytes * p.beta;  // Table I, Tree-AR
}

double broadcastCost(double bytes, int n, const NetworkParams& p) {
  checkArgs("broadcastCost", bytes, n, p);
  return p.alpha * log2n(n) + log2n(n) * bytes * p.beta;  // Table I, Broadcast
}

double allGatherCost(double bytes, int n, const NetworkParams& p) {
  checkArgs("allGatherCost", bytes, n, p);
  return p.alpha * log2n(n) + (n - 1) * bytes * p.beta;  // Table I, Allgather
}

double barrierCost(int n, const NetworkParams& p) {
  checkArgs("barrierCost", 0.0, n, p);
  return p.alpha * log2n(n);  // dissemination barrier, charged like Table I's log N rows
}

const char* toString(EngineOp op) {
  switch (op) {
    case EngineOp::AllReduce: return "allreduce";
    case EngineOp::AllGather: return "allgather";
    case EngineOp::Broadcast: return "broadcast";
    case EngineOp::ReduceScatter: return "reducescatter";
    case EngineOp::Barrier: return "barrier";
  }
  return "?";
}

double engineRounds(EngineOp op, int n) {
  // α = 1 s, β = 0, no bytes: a row's cost is then its count of latency terms.
  const NetworkParams alphaOnly{1.0, 0.0};
  switch (op) {
    case EngineOp::AllReduce:
    case EngineOp::ReduceScatter: return allReduceCost("engine", 0.0, n, alphaOnly);
    case EngineOp::AllGather: return allGatherCost(0.0, n, alphaOnly);
    case EngineOp::Broadcast: return broadcastCost(0.0, n, alphaOnly);
    case EngineOp::Barrier: return barrierCost(n, alphaOnly);
  }
  GZ_ASSERT(false, "unknown EngineOp");
}

double agTopKCost(double modelBytes, double cr, int n, const NetworkParams& p) {
  checkCr("agTopKCost", cr);
  // §3-D: AG exchanges 2Mc bytes (values and indices): α log N + 2Mcβ(N-1).
  return allGatherCost(2 * modelBytes * cr, n, p);
}

double artRingCost(double modelBytes, double cr, int n, const NetworkParams& p) {
  checkCr("artRingCost", cr);
  // Eq. 4a = Broadcast(Mc) + Ring-AR(Mc).
  return broadcastCost(modelBytes * cr, n, p) + ringAllReduceCost(modelBytes * cr, n, p);
}

double artTreeCost(double modelBytes, double cr, int n, const NetworkParams& p) {
  checkCr("artTreeCost", cr);
  // Eq. 4b = Broadcast(Mc) + Tree-AR(Mc) = 3α log N + 3Mcβ log N.
  return broadcastCost(modelBytes * cr, n, p) + treeAllReduceCost(modelBytes * cr, n, p);
}

const char* toString(TopKCollective c) {
  switch (c) {
    case TopKCollective::AllGather: return "ag";
    case TopKCollective::ArtRing: return "art-ring";
    case TopKCollective::ArtTree: return "art-tree";
  }
  return "?";
}

TopKCollective cheapestTopK(double modelBytes, double cr, int n, const NetworkParams& p) {
  const double ag = agTopKCost(modelBytes, cr, n, p);
  const double ring = artRingCost(modelBytes, cr, n, p);
  const double tree = artTreeCost(modelBytes, cr, n, p);
  if (ag <= ring && ag <= tree) return TopKCollective::AllGather;
  return ring <= tree ? TopKCollective::ArtRing : TopKCollective::ArtTree;
}

double allReduceCost(const std::string& algorithm, double bytes, int n, const NetworkParams& p) {
  if (algorithm == "ring" || algorithm == "engine") return ringAllReduceCost(bytes, n, p);
  if (algorithm == "tree") return treeAllReduceCost(bytes, n, p);
  if (algorithm == "ps") return psCost(bytes, n, p);
  throw UserError(fmt::format("allReduceCost: unknown collective '{}' (known: ring, tree, ps, engine)", algorithm));
}

}  // namespace gradzip::comm
