// Rank 0's screening of the candidate plans (docs/controller.md, "A
// decision", steps 2-3): each compressor configuration's codec runs on the
// large buckets' last local gradients, which gives its encode + decode
// seconds, its wire bits per bucket and its statistics (an error-feedback
// codec over screen_reps replays, its steady state); each candidate then
// gets its predicted step (the α-β model of its collective, pipelined behind
// backward by controller/OverlapModel.h) and its statistical cost. It keeps
// the screenings later decisions reuse: the provisional step's for the first
// decision, and the last full screening for network decisions within
// min_interval (encode/decode, bits and statistics do not depend on the link).
//
// Contract: rank 0 only, on the training thread, between steps. Reads the
// buckets through SyncedBuckets and runs fresh codecs of its own, never the
// ones training uses.
#pragma once

#include "comm/CostModel.h"
#include "comm/LocalCommunicator.h"
#include "controller/Candidates.h"
#include "controller/ControllerOptions.h"
#include "controller/OverlapModel.h"
#include "controller/Pareto.h"
#include "controller/WorkAhead.h"
#include "sync/CompressionStats.h"
#include "sync/SyncedBuckets.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gradzip::trainer {

// One candidate as screened: its codec's measurements, and (once predicted)
// its communication, exposed sync and step.
struct Screened {
  double encodeDecode = 0, comm = 0, predicted = 0;
  double exposed = 0;  // the sync seconds predicted to show in the step (controller/OverlapModel.h)
  double bits = 0;  // wire bits per coordinate over the large buckets
  std::vector<double> bucketBits;          // per large bucket
  std::vector<double> bucketDownBits;      // per large bucket: a PS owner's downlink
  std::vector<double> bucketEncodeDecode;  // per large bucket
  // Without error feedback: the codec on the last gradient. With it: the
  // last of screen_reps replays of that gradient, the residual included,
  // an estimate of the steady state the plan runs in.
  CompressionStats stats;
  bool ok = false;
};

class Screening {
 public:
  Screening(const ControllerOptions& opts, const std::vector<Candidate>& candidates, const std::vector<int>& large,
            const SyncedBuckets& sync, int worldSize);
  ~Screening();

  // At the provisional step, while β is still measured: starts screening
  // every compressor configuration on `background` threads (WorkAhead), so
  // that it runs while this thread waits on the network; provisional()
  // finishes it.
  void startProvisional(int background);
  // How many configurations the screening started ahead has finished by
  // now; none when none was started.
  std::optional<size_t> screenedAhead() const;
  // At the provisional step: every candidate's (predicted step, statistical
  // cost) on a step of `base` seconds with `timing`'s bucket pipeline at the
  // link `net`, each candidate's screening in `screened`, all logged into
  // rec (and the front). Kept for the first decision.
  std::vector<Objectives> provisional(double base, const OverlapTimings& timing, const comm::NetworkParams& net,
                                      std::vector<Screened>& screened, nlohmann::json& rec);
  // At a decision at `step`, as provisional(). The first decision (`first`)
  // reuses the provisional step's screenings; a network decision
  // (`network`) the last full screening when it is at most min_interval
  // steps old; others screen afresh. With `onlyCompressor` set (a gain
  // decision under gain_scope: family), only that compressor's candidates
  // are screened, the others left at infinity and logged with "screened":
  // false.
  std::vector<Objectives> decision(int64_t step, bool first, bool network, const std::string& onlyCompressor,
                                   double base, const OverlapTimings& timing, const comm::NetworkParams& net,
                                   std::vector<Screened>& screened, nlohmann::json& rec);

 private:
  // `plan`'s codec on each large bucket's last gradient: encode + decode
  // seconds, wire bits per bucket, statistics. An error-feedback codec runs
  // screen_reps replays of the last gradient with its residual and measures
  // the last call, whose input carries the residual built up: sparse plans
  // then show their steady-state vNMSE, not the fresh gradient's (ablation,
  // "Screening the steady state"), on the steadyStateBuckets().
  Screened codec(const Plan& plan);
  // The large buckets an error-feedback codec's sequence runs on, in order:
  // up to kSteadyStateCoordinates (at least one bucket); the others get two
  // calls on their last gradient.
  std::vector<int> steadyStateBuckets() const;
  // codec() of every compressor configuration (its collectives share
  // encode/decode), with predicted step base + the part of its encode/decode
  // and α-β communication that the buckets' pipeline behind backward leaves
  // exposed; logs them (and the front) into rec. `byCodec` caches codec()
  // per compressor configuration: entries already there are reused, missing
  // ones are screened and added.
  std::vector<Objectives> all(double base, const OverlapTimings& timing, const comm::NetworkParams& net,
                              std::vector<Screened>& screened, nlohmann::json& rec,
                              std::map<std::string, Screened>& byCodec, const std::string& onlyCompressor = "");
  // Starts codec() of every compressor configuration that all(byCodec,
  // onlyCompressor) will need and byCodec lacks, on `background` threads
  // (0: none until all()). all() takes it over: it works too, waits, and adds
  // the results to byCodec. The configurations' options are deep copies
  // (yaml-cpp nodes share memory).
  void ahead(const std::map<std::string, Screened>& byCodec, const std::string& onlyCompressor, int background);

  const ControllerOptions& opts_;
  const std::vector<Candidate>& candidates_;
  const std::vector<int>& large_;
  const SyncedBuckets& sync_;
  int worldSize_;
  comm::LocalCommunicator local_;  // the fresh codecs' context
  // The provisional step's screenings, reused by the first decision.
  std::map<std::string, Screened> provisional_;
  // The last screening of every candidate afresh and its step, which network
  // decisions within min_interval reuse.
  std::map<std::string, Screened> last_;
  int64_t lastStep_ = -1;
  // The screening ahead() started, which all() finishes. Last, so that it is
  // destroyed (its threads joined) before the state they read.
  struct Ahead {
    std::vector<Plan> plans;        // one per compressor configuration
    std::vector<Screened> results;  // results[i]: plans[i]'s codec()
    std::unique_ptr<WorkAhead> work;
  };
  std::unique_ptr<Ahead> ahead_;
};

}  // namespace gradzip::trainer
