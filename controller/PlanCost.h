// The predicted communication time of a plan: a compressor's exact bytes on the
// wire for a bucket (Compressor::bitsPerCoordinate) charged through the α-β
// cost of the plan's collective (flexible-communication paper Table I, Eq. 4;
// comm/CostModel.h). Every cost here is linear in α and β, so a plan's cost for
// one bucket is a pair of coefficients (a, m) with seconds = a·α + m·β: the same
// pair predicts a candidate's time and turns an observed collective time into a
// sample for refitting α and β (comm/LinkFitter.h). The controller adds the
// candidate's measured encode/decode seconds on top.
#pragma once

#include "comm/AlphaBetaFit.h"
#include "comm/CostModel.h"
#include "sync/Plan.h"

#include <cstdint>
#include <optional>

namespace gradzip::trainer {

// Coefficients (a, m) of one bucket of d coordinates among n ranks under
// `plan`, whose compressor sends `bitsPerCoordinate` bits per coordinate (b)
// and whose parameter-server owners return `downlinkBitsPerCoordinate` (the
// uplink's when absent; compress/Compressor.h). With M = b·d/8 bytes and
// M↓ the downlink's:
//   engine, ring: 2(N−1)            , 2(N−1)/N·M       (Table I, ring)
//   tree:         2 log N            , 2 log N·M        (Table I, tree)
//   ps (sharded): 2(N−1)             , (N−1)/N·(M + M↓) (comm/ParameterServer.h: each
//                 rank sends (N−1)/N of its uplink in N−1 messages of M/N, then as
//                 the owner of one shard N−1 copies of its M↓/N; one round each way;
//                 2(N−1)/N·M when M↓ = M; Table I's star form puts all on one server;
//                 M↓ is the downlink's own width, e.g. THC's widened sums)
//   allgather:    log N              , (N−1)·M          (Table I); TopK's "engine"
//                 (c10d's all-gather; compress/Factory.h aggregatesByAllGather) is charged this row too
//   artopk:       Eq. 4a (ring, engine) or 4b (tree) with M = 4d and c = options.cr,
//                 a log N broadcast plus the sharded all-reduce for ps
// Schemes whose aggregation makes more than one dependent round
// (compress/Factory.h collectiveRounds: TopKC's chunk norms, PowerSGD's
// second all-reduce, THC's norm/range round and its all-reduce deployment's
// saturation count) pay the collective's latency term once more per round;
// PlanCost.LatencyTermsAreTheRoundsTheCodeRuns checks every default
// candidate's a against the rounds its code issues. N = 1 costs nothing. `plan.collective` must be one
// of the above (UserError otherwise).
comm::AlphaBetaSample planCoefficients(const Plan& plan, double bitsPerCoordinate, int64_t d, int n,
                                        std::optional<double> downlinkBitsPerCoordinate = std::nullopt);

// a·α + m·β.
inline double planSeconds(const comm::AlphaBetaSample& c, const comm::NetworkParams& p) {
  return c.alphaCount * p.alpha + c.betaBytes * p.beta;
}

}  // namespace gradzip::trainer
