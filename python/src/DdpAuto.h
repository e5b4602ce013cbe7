// DdpAuto: `plan="auto"` under a DDP hook. It shows the controller
// (controller/Controller.h) the hook's buckets through sync/SyncedBuckets.h,
// times them as DDP hands them over, and drives the controller between steps.
// What differs from `gradzip train`: the controller starts once DDP's buckets
// are final (after DDP's bucket rebuild at the end of the first step; until
// then every bucket runs fp32), a step's compute time is measured from one
// step's last bucket to the next step's, and there is no exploration: a hook
// cannot snapshot and restore the training state, so each decision takes the
// knee of the predicted front (screening of every candidate on the live
// gradient, without applying it) and keeps watching the result.
#pragma once

#include "comm/Communicator.h"
#include "sync/BucketSync.h"
#include "sync/Plan.h"

#include <torch/serialize/archive.h>

#include <memory>
#include <string>
#include <vector>

namespace gradzip::python {

class DdpAuto {
 public:
  // planYaml: the {name: auto, ...} mapping with the controller's keys (empty
  // for the defaults). Asking for exploration is a UserError; the provisional
  // rewind is off.
  DdpAuto(const std::string& planYaml, const std::string& logDir, comm::Communicator& comm,
          std::vector<std::unique_ptr<trainer::BucketSync>>& buckets);
  ~DdpAuto();

  // The plan a bucket starts on before the controller has started.
  trainer::Plan startingPlan(int bucket) const;
  // Submit time of a bucket (the hook's lock is held; cheap).
  void handedOver(int bucket, bool last);
  // A bucket's run on the communication thread; `flat` holds its mean.
  void ran(int bucket, const trainer::BucketRun& run, const at::Tensor& flat);
  // Whether the controller wants compression measured (BucketSync::run).
  bool measuring() const;
  // Collective: the step's last bucket is done.
  void afterStep(int64_t step);

  void save(torch::serialize::OutputArchive& ar) const;
  void load(torch::serialize::InputArchive& ar);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gradzip::python
