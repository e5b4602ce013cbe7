// The α-β communication cost model of the flexible-communication paper: Table I
// for the collectives and Eq. 4 for top-k sparsified gradients synchronised by
// all-gather (AG-TopK) or by AR-TopK (an index broadcast plus a dense all-reduce
// of the selected values, over a ring or a tree). Costs are in seconds. The
// MOO controller ranks plans with these, using α and β probed or fitted from
// observed collective times. log N is log2 N as a real number, as in the paper
// (a tree over a non-power-of-two N is charged log2 N, not its depth).
#pragma once

#include <cstdint>
#include <string>

namespace gradzip::comm {

// α: seconds per message (latency); β: seconds per byte (1 / bandwidth).
struct NetworkParams {
  double alpha = 0.0;
  double beta = 0.0;
  // From a latency in seconds and a bandwidth in Gbit/s (10^9 bits per second):
  // β = 8 / (gbps · 10^9) seconds per byte.
  static NetworkParams fromLatencyAndGbps(double alphaSeconds, double gbps);
};

// Table I, M bytes among N workers (N >= 1; N = 1 costs nothing):
// PS (star):       2α + 2(N-1)Mβ
double psCost(double bytes, int n, const NetworkParams& p);
// Ring-AR:         2(N-1)α + 2((N-1)/N)Mβ
double ringAllReduceCost(double bytes, int n, const NetworkParams& p);
// Tree-AR:         2α log N + 2 log N Mβ
double treeAllReduceCost(double bytes, int n, const NetworkParams& p);
// Broadcast:       α log N + log N Mβ
double broadcastCost(double bytes, int n, const NetworkParams& p);
// Allgather:       α log N + (N-1)Mβ   (M = bytes each worker contributes)
double allGatherCost(double bytes, int n, const NetworkParams& p);
// Barrier:         α log N   (not in Table I: Gloo's dissemination barrier runs
//                  ⌈log2 N⌉ rounds of empty messages; charged log N like the
//                  table's other logarithmic rows)
double barrierCost(int n, const NetworkParams& p);

// The operations the communication engine runs with its own algorithms (the
// Communicator's collectives on c10d).
enum class EngineOp { AllReduce, AllGather, Broadcast, ReduceScatter, Barrier };
const char* toString(EngineOp op);
// The message rounds of one engine operation among N workers: the α
// coefficient of its row above, derived from the row itself, so latency
// emulation (Communicator::setSendDelay) and the cost model cannot disagree.
// All-reduce as Ring-AR, 2(N-1), as allReduceCost charges "engine";
// reduce-scatter, which Gloo runs as an all-reduce, the same; all-gather,
// broadcast and barrier log N. 0 for N = 1.
double engineRounds(EngineOp op, int n);

// Eq. 4 (§3-D), top-k at compression ratio c (0 < c <= 1) of a dense gradient of
// M = modelBytes bytes. The paper counts Mc bytes of values and Mc bytes of
// indices (32-bit values and 32-bit indices), so AG moves 2Mc bytes per worker:
// AG-TopK:   α log N + 2Mcβ(N-1)
double agTopKCost(double modelBytes, double cr, int n, const NetworkParams& p);
// ART-Ring (Eq. 4a): α[2(N-1) + log N] + Mcβ[2(N-1)/N + log N]
//   (broadcast of the Mc index bytes, then ring all-reduce of Mc value bytes)
double artRingCost(double modelBytes, double cr, int n, const NetworkParams& p);
// ART-Tree (Eq. 4b): 3α log N + 3Mcβ log N
double artTreeCost(double modelBytes, double cr, int n, const NetworkParams& p);

// The top-k collective with the least modelled cost; ties go to the earlier of
// AG, ART-Ring, ART-Tree. Evaluates all three (the closed-form switch points of
// Eq. 5a-5c divide by zero at N = 2).
enum class TopKCollective { AllGather, ArtRing, ArtTree };
const char* toString(TopKCollective c);
TopKCollective cheapestTopK(double modelBytes, double cr, int n, const NetworkParams& p);

// Table I cost of a dense all-reduce by one of collectiveNames() (Collective.h):
// "ring", "tree", "ps"; "engine" is charged as a ring (Gloo and NCCL run ring
// algorithms for large messages). UserError for other names.
double allReduceCost(const std::string& algorithm, double bytes, int n, const NetworkParams& p);

}  // namespace gradzip::comm
