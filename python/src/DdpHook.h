// DdpHook: gradzip's gradient synchronisation behind a PyTorch
// DistributedDataParallel communication hook. DDP hands over each bucket's
// flat gradient as backward fills it; the hook queues it to one communication
// thread that runs the bucket's Plan (sync/BucketSync.h) over DDP's own process
// group and completes the bucket's future with the mean over ranks, so
// communication overlaps the rest of backward as it does in `gradzip train`.
// Buckets are run in the order DDP hands them over, which is the same on every
// rank. Under `auto` the controller (controller/Controller.h) chooses the
// plans between steps from the measured link and gradient statistics, without
// exploration (a hook cannot snapshot and restore the training state).
#pragma once

#include "comm/Communicator.h"
#include "sync/BucketSync.h"
#include "sync/Plan.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gradzip::python {

struct DdpHookOptions {
  // The plan as YAML text, as a train config's `compress:` section: a mapping
  // (name, collective, the compressor's options), or `auto` / {name: auto, ...}
  // with the controller's keys.
  std::string plan;
  std::string logDir;  // under auto: decisions.jsonl and rank<r>/plans.jsonl go here
  bool namedTensors = false;  // layouts carry the model's parameter names (stable across processes)
  uint64_t seed = 0;          // shared randomness (THC's rotation, ...), as run.seed
  std::string nanPolicy = "stop";  // stop | skip, as train.nan_policy
  int64_t nanSkipMaxRun = 10;      // skip: fail after more than this many skipped steps in a row
};

// A NaN or Inf gradient under nan_policy: stop, or too many skipped steps;
// raised on every rank at the same bucket.
class NonFiniteGradient : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DdpAuto;  // `auto`: the controller over the DDP buckets (python/src/DdpAuto.h)

class DdpHook {
 public:
  // Throws UserError for a plan or option gradzip does not know, naming it and
  // listing the valid ones, and for a process group whose backend cannot run
  // gradzip's collectives (naming the backend and the plan).
  DdpHook(const c10::intrusive_ptr<c10d::ProcessGroup>& group, DdpHookOptions opts);
  ~DdpHook();
  DdpHook(const DdpHook&) = delete;
  DdpHook& operator=(const DdpHook&) = delete;

  // Queues one DDP bucket: `buffer` is its flat gradient (averaged in place),
  // `layout` its tensors, `last` whether it is the step's last bucket. The
  // future completes with `buffer` once every rank has averaged it, or with the
  // error that stopped the sync (every later bucket gets the same error).
  c10::intrusive_ptr<c10::ivalue::Future> submit(int index, at::Tensor buffer,
                                                 std::vector<compress::TensorSlot> layout, bool last);

  // Steps completed (each ends with the last bucket), steps skipped for a
  // non-finite gradient, and bucket k's current plan key ("" before its first step).
  int64_t step() const;
  int64_t skippedSteps() const;
  bool lastStepSkipped() const;
  std::string planKey(int bucket) const;
  int numBuckets() const;
  const std::string& backend() const { return backend_; }

  // Every piece of compressor and controller state, and the step counter, as
  // one archive; load() applies each bucket's part when that bucket (with the
  // same size) first runs. Between steps only.
  std::string save() const;
  void load(const std::string& archive);

 private:
  struct Job {
    int index;
    at::Tensor buffer;
    std::vector<compress::TensorSlot> layout;
    bool last;
    c10::intrusive_ptr<c10::ivalue::Future> future;
  };
  void loop();
  void runJob(Job& job);
  void endStep();
  void complete(Job& job);
  void fail(Job& job, const std::exception_ptr& e);
  void checkPlansAgree();
  trainer::BucketSync& bucketFor(const Job& job);
  // load()'s state for a bucket just made: its own when its tensors match
  // the saved bucket's, else the saved residuals go to pool_ by tensor name.
  void restoreSaved(trainer::BucketSync& b, const std::string& tensors);
  void poolResidual(const trainer::BucketSync& from, const at::Tensor& e);

  DdpHookOptions opts_;
  std::string backend_;
  std::unique_ptr<comm::Communicator> comm_;
  std::optional<trainer::Plan> plan_;  // the static plan; empty under auto
  std::vector<std::unique_ptr<trainer::BucketSync>> buckets_;
  std::unique_ptr<DdpAuto> auto_;
  std::string pendingLoad_;      // load()'s archive, applied per bucket
  std::set<int> loaded_;         // which saved buckets were applied
  bool poolFilled_ = false;      // the archive's residuals went to pool_
  std::map<std::string, at::Tensor> pool_;  // residuals by tensor name, waiting for their new bucket
  int64_t step_ = 0, skipped_ = 0, skipRun_ = 0;
  bool stepSkipped_ = false, lastSkipped_ = false;
  bool agreed_ = false;
  std::vector<Job> held_;  // completed at the step's end: its last bucket, and under nan_policy skip all
  int64_t inFlight_ = 0;   // submitted, not yet completed

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace gradzip::python
