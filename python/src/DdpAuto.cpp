// Implements python/src/DdpAuto.h: the SyncedBuckets view of the DDP buckets,
// a ControlledLoop that refuses snapshots, and the controller's start-up once
// DDP's buckets are final.
#include "python/src/DdpAuto.h"

#include "controller/Controller.h"
#include "controller/ControllerOptions.h"
#include "util/Error.h"
#include "util/Yaml.h"

#include <fmt/format.h>
#include <torch/serialize.h>

#include <chrono>
#include <map>
#include <sstream>

namespace gradzip::python {
namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// DDP rebuilds its buckets once, in the order the first step's gradients
// arrived; the controller starts when this process's buckets are final.
constexpr int64_t kStartAfterSteps = 2;

trainer::ControllerOptions optionsFrom(const std::string& planYaml) {
  YamlReader r = YamlReader::loadString(planYaml.empty() ? "{name: auto}" : planYaml, "plan");
  if (r.has("explore"))
    r.fail("explore", "a DDP hook cannot snapshot and restore the training state, so it does not explore: "
                      "each decision takes the knee of the screened (predicted) front. Leave explore out, or "
                      "use `gradzip train` to explore");
  if (r.has("geometry") && r.getString("geometry", "") == "optimizer")
    r.fail("geometry", "a DDP hook does not see the optimizer; the controller measures in the gradient's geometry");
  r.getString("name", "auto");
  auto o = trainer::ControllerOptions::fromYaml(r);
  o.explore = 0;
  o.provisionalRewind = false;
  o.geometry = "gradient";
  return o;
}

}  // namespace

class DdpAuto::Impl final : public trainer::SyncedBuckets, public trainer::ControlledLoop {
 public:
  Impl(trainer::ControllerOptions opts, std::string logDir, comm::Communicator& comm,
       std::vector<std::unique_ptr<trainer::BucketSync>>& buckets)
      : opts_(std::move(opts)), logDir_(std::move(logDir)), comm_(comm), buckets_(buckets),
        defaultPlan_(opts_.initial) {}

  // --- SyncedBuckets
  int numBuckets() const override { return static_cast<int>(buckets_.size()); }
  int64_t bucketNumel(int b) const override { return flat_.at(b).numel(); }
  const std::vector<compress::TensorSlot>& bucketLayout(int b) const override { return buckets_.at(b)->layout(); }
  const torch::Tensor& bucketGradient(int b) const override { return flat_.at(b); }
  const torch::Tensor& lastInput(int b) const override { return buckets_.at(b)->lastInput(); }
  const trainer::SyncBreakdown& lastBreakdown(int b) const override { return last_.at(b); }
  const trainer::CompressionStats& lastWeightedStats(int b) const override {
    return buckets_.at(b)->lastWeightedStats();
  }
  const std::vector<double>& statWeights(int b) const override { return buckets_.at(b)->weights(); }
  bool overlapsBackward() const override { return buckets_.size() > 1; }
  double lastBackwardEnd() const override { return backwardEnd_; }
  const trainer::Plan& plan(int b) const override { return buckets_.at(b)->plan(); }
  void setPlan(int b, const trainer::Plan& plan) override {
    plans_[b] = plan;
    buckets_.at(b)->setPlan(plan);
  }
  void setPlan(const trainer::Plan& plan) override {
    defaultPlan_ = plan;
    plans_.clear();
    for (auto& b : buckets_)
      if (b) b->setPlan(plan);
  }
  void setMeasureCompression(bool on) override { measure_ = on; }
  void setStatScale(const std::function<std::optional<double>(const torch::Tensor&)>&) override {}

  // --- ControlledLoop: exploration is off (optionsFrom), so these never run.
  trainer::StepMeasure exploreStep() override { GZ_ASSERT(false, "a DDP hook does not explore"); }
  std::string snapshot() override { GZ_ASSERT(false, "a DDP hook takes no snapshots"); }
  void restore(const std::string&) override { GZ_ASSERT(false, "a DDP hook takes no snapshots"); }

  trainer::Plan startingPlan(int b) const {
    const auto it = plans_.find(b);
    return it != plans_.end() ? it->second : defaultPlan_;
  }

  void handedOver(int b, bool last) {
    const auto now = Clock::now();
    if (handover_.size() <= size_t(b)) handover_.resize(b + 1);
    handover_[b] = seconds(stepStart_, now);
    if (last) backwardEnd_ = handover_[b];
  }

  void ran(int b, const trainer::BucketRun& run, const at::Tensor& flat) {
    if (last_.size() <= size_t(b)) {
      last_.resize(b + 1);
      flat_.resize(b + 1);
    }
    auto& l = last_[b];
    l = run.breakdown();
    l.handover = handover_.size() > size_t(b) ? handover_[b] : 0;
    l.busy = run.seconds;
    flat_[b] = flat;
  }

  void afterStep(int64_t step) {
    const auto now = Clock::now();
    trainer::StepMeasure m;
    m.step = seconds(stepStart_, now);
    m.compute = backwardEnd_;
    m.exposed = std::max(0.0, m.step - backwardEnd_);
    for (const auto& l : last_) {
      m.encode += l.encode;
      m.communicate += l.communicate;
      m.decode += l.decode;
    }
    ++stepsHere_;
    if (!controller_ && stepsHere_ >= kStartAfterSteps) startController(step);
    else if (controller_) controller_->afterStep(step, m, *this);
    stepStart_ = Clock::now();  // the controller's seconds count towards the next step, as in training
  }

  bool measuring() const { return measure_; }

  void save(torch::serialize::OutputArchive& ar) const {
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (buckets_[b]) ar.write(fmt::format("auto/plan{}", b), c10::IValue(YAML::Dump(buckets_[b]->plan().toYaml())));
    ar.write("auto/started", c10::IValue(controller_ != nullptr));
    if (controller_) {
      torch::serialize::OutputArchive sub;
      controller_->save(sub);
      std::ostringstream out;
      sub.save_to(out);
      ar.write("auto/controller", c10::IValue(out.str()));
    }
  }

  void load(torch::serialize::InputArchive& ar) {
    GZ_CHECK(!controller_, "load_state_dict() before the first step only (the controller has started)");
    plans_.clear();
    c10::IValue v;
    for (int b = 0; ar.try_read(fmt::format("auto/plan{}", b), v); ++b)
      plans_[b] = trainer::Plan::fromYaml(YamlReader::loadString(v.toStringRef(), "saved plan"));
    pending_ = ar.try_read("auto/controller", v) ? v.toStringRef() : "";
  }

 private:
  void startController(int64_t step) {
    controller_ = std::make_unique<trainer::Controller>(opts_, comm_, *this, logDir_);
    controller_->start(step);
    if (!pending_.empty()) {
      torch::serialize::InputArchive sub;
      std::istringstream in(pending_);
      sub.load_from(in);
      controller_->load(sub);
      controller_->resumed(step);
      pending_.clear();
    } else {
      // start() put every bucket on `initial`; buckets resumed on another plan keep it.
      for (const auto& [b, plan] : plans_)
        if (b < numBuckets()) buckets_[b]->setPlan(plan);
    }
    controller_->begin(step + 1, *this);
  }

  trainer::ControllerOptions opts_;
  std::string logDir_;
  comm::Communicator& comm_;
  std::vector<std::unique_ptr<trainer::BucketSync>>& buckets_;
  std::unique_ptr<trainer::Controller> controller_;
  trainer::Plan defaultPlan_;
  std::map<int, trainer::Plan> plans_;  // plans set per bucket (setPlan, a loaded state)
  std::string pending_;                 // a loaded controller state, applied at start
  std::vector<trainer::SyncBreakdown> last_;
  std::vector<at::Tensor> flat_;
  std::vector<double> handover_;
  Clock::time_point stepStart_ = Clock::now();
  double backwardEnd_ = 0;
  int64_t stepsHere_ = 0;
  bool measure_ = false;
};

DdpAuto::DdpAuto(const std::string& planYaml, const std::string& logDir, comm::Communicator& comm,
                 std::vector<std::unique_ptr<trainer::BucketSync>>& buckets)
    : impl_(std::make_unique<Impl>(optionsFrom(planYaml), logDir, comm, buckets)) {}
DdpAuto::~DdpAuto() = default;
trainer::Plan DdpAuto::startingPlan(int bucket) const { return impl_->startingPlan(bucket); }
void DdpAuto::handedOver(int bucket, bool last) { impl_->handedOver(bucket, last); }
void DdpAuto::ran(int bucket, const trainer::BucketRun& run, const at::Tensor& flat) { impl_->ran(bucket, run, flat); }
void DdpAuto::afterStep(int64_t step) { impl_->afterStep(step); }
bool DdpAuto::measuring() const { return impl_->measuring(); }
void DdpAuto::save(torch::serialize::OutputArchive& ar) const { impl_->save(ar); }
void DdpAuto::load(torch::serialize::InputArchive& ar) { impl_->load(ar); }

}  // namespace gradzip::python
