// Implements python/src/DdpHook.h: the communication thread, the per-bucket
// plans, the cross-rank plan check, the NaN policy and the state archive.
#include "python/src/DdpHook.h"

#include "comm/ProcessGroupCommunicator.h"
#include "python/src/DdpAuto.h"
#include "util/Error.h"
#include "util/Yaml.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/serialize.h>

#include <algorithm>
#include <map>
#include <sstream>

namespace gradzip::python {
namespace {

// The CPU backend of DDP's group: gradzip's compressors and collectives run on
// CPU tensors over Gloo.
c10::intrusive_ptr<c10d::Backend> cpuBackend(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                             const std::string& plan) {
  c10::intrusive_ptr<c10d::Backend> backend;
  try {
    backend = group->getBackend(c10::DeviceType::CPU);
  } catch (const std::exception&) {
  }
  const std::string name = backend ? backend->getBackendName() : group->getBackendName();
  GZ_CHECK(name == "gloo",
           "plan {} cannot run on this process group's backend '{}': gradzip's hooks run their compressors and "
           "collectives on CPU tensors over Gloo (init_process_group(\"gloo\"), or \"cpu:gloo,cuda:nccl\")",
           plan, name);
  return backend;
}

// A bucket's tensors, in order, with their shapes: its saved state applies to
// a bucket with the same ones only.
std::string tensorsOf(const std::vector<compress::TensorSlot>& layout) {
  std::string s;
  for (const auto& t : layout) s += fmt::format("{}|{};", t.name, fmt::join(t.shape, "x"));
  return s;
}

std::chrono::milliseconds timeoutOf(c10d::Backend& backend) {
  try {
    return backend.getBackendOptions()->timeout;
  } catch (const std::exception&) {
    return std::chrono::minutes(5);  // a backend that does not report one
  }
}

}  // namespace

DdpHook::DdpHook(const c10::intrusive_ptr<c10d::ProcessGroup>& group, DdpHookOptions opts) : opts_(std::move(opts)) {
  GZ_CHECK(opts_.nanPolicy == "stop" || opts_.nanPolicy == "skip",
           "nan_policy '{}' is not one of: stop, skip", opts_.nanPolicy);
  GZ_CHECK(opts_.nanSkipMaxRun >= 0, "nan_skip_max_run must be >= 0, not {}", opts_.nanSkipMaxRun);
  YAML::Node node;
  try {
    node = YAML::Load(opts_.plan);
  } catch (const YAML::Exception& e) {
    throw UserError(fmt::format("plan is not valid YAML ({}): {}", e.what(), opts_.plan));
  }
  const bool isAuto = (node.IsScalar() && node.as<std::string>() == "auto") ||
                      (node.IsMap() && node["name"] && node["name"].as<std::string>() == "auto");
  GZ_CHECK(isAuto || node.IsMap(), "plan must be a mapping like {{name: fp16}}, or auto; got '{}'", opts_.plan);
  if (!isAuto) plan_ = trainer::Plan::fromYaml(YamlReader::loadString(opts_.plan, "plan"));
  const std::string planName = isAuto ? "auto" : plan_->key();
  auto backend = cpuBackend(group, planName);
  backend_ = group->getBackendName();
  comm_ = std::make_unique<comm::ProcessGroupCommunicator>(backend, nullptr, group->getRank(), group->getSize(),
                                                           timeoutOf(*backend));
  if (isAuto) auto_ = std::make_unique<DdpAuto>(node.IsMap() ? opts_.plan : std::string(), opts_.logDir, *comm_, buckets_);
  worker_ = std::thread([this] { loop(); });
}

DdpHook::~DdpHook() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

c10::intrusive_ptr<c10::ivalue::Future> DdpHook::submit(int index, at::Tensor buffer,
                                                        std::vector<compress::TensorSlot> layout, bool last) {
  GZ_CHECK(buffer.device().is_cpu(),
           "bucket {} is on {}: gradzip's hooks run on CPU tensors over Gloo (GPU support is not there yet)", index,
           buffer.device().str());
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) {
      future->setError(error_);
      return future;
    }
    if (auto_) auto_->handedOver(index, last);
    ++inFlight_;
    queue_.push_back(Job{index, std::move(buffer), std::move(layout), last, future});
  }
  cv_.notify_all();
  return future;
}

void DdpHook::loop() {
  for (;;) {
    Job job;
    std::exception_ptr failed;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      failed = error_;
    }
    if (failed) {
      fail(job, failed);
      continue;
    }
    try {
      runJob(job);
    } catch (...) {
      auto e = std::current_exception();
      std::vector<Job> held;
      {
        std::lock_guard<std::mutex> lock(mu_);
        error_ = e;
        held.swap(held_);
      }
      for (auto& j : held) fail(j, e);
      if (job.future) fail(job, e);
    }
  }
}

// The count drops before the future completes: DDP's backward returns as
// soon as the last future does, and state_dict() may follow at once.
void DdpHook::complete(Job& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --inFlight_;
  }
  auto future = std::move(job.future);
  future->markCompleted(c10::IValue(job.buffer));
}

void DdpHook::fail(Job& job, const std::exception_ptr& e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --inFlight_;
  }
  auto future = std::move(job.future);
  future->setError(e);
}

void DdpHook::checkPlansAgree() {
  // Every rank's plan key, padded to one length, gathered: a rank on another
  // plan would otherwise run other collectives and hang the rest.
  const std::string mine = plan_ ? plan_->key() : "auto";
  auto len = torch::tensor({static_cast<int64_t>(mine.size())});
  comm_->allReduce(len, comm::ReduceOp::Max).wait();
  auto bytes = torch::zeros({len.item<int64_t>()}, torch::kUInt8);
  std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
  std::vector<at::Tensor> all(comm_->size());
  for (auto& t : all) t = torch::empty_like(bytes);
  comm_->allGather(all, bytes).wait();
  std::vector<std::string> keys;
  for (const auto& t : all) keys.emplace_back(reinterpret_cast<const char*>(t.data_ptr()), strnlen(reinterpret_cast<const char*>(t.data_ptr()), t.numel()));
  for (const auto& k : keys)
    if (k != keys.front()) {
      std::vector<std::string> named;
      for (size_t r = 0; r < keys.size(); ++r) named.push_back(fmt::format("rank {}: {}", r, keys[r]));
      throw UserError(fmt::format("the ranks run different plans ({}); every rank must pass the same plan to "
                                  "gradzip.ddp_hook",
                                  fmt::join(named, "; ")));
    }
}

trainer::BucketSync& DdpHook::bucketFor(const Job& job) {
  if (static_cast<int>(buckets_.size()) <= job.index) buckets_.resize(job.index + 1);
  auto& b = buckets_[job.index];
  // Every step: compared slot by slot, without building tensorsOf's string.
  const auto sameSlots = [&](const std::vector<compress::TensorSlot>& l) {
    return std::equal(l.begin(), l.end(), job.layout.begin(), job.layout.end(), [](const auto& x, const auto& y) {
      return x.offset == y.offset && x.numel == y.numel && x.shape == y.shape && x.name == y.name;
    });
  };
  if (b && sameSlots(b->layout())) return *b;
  // DDP rebuilds its buckets after a process's first step, in the order the
  // gradients arrived, and may regroup them: the error-feedback residual
  // follows each tensor into its new bucket (Σ applied + residual =
  // Σ gradients, compress/ErrorFeedback.h); other compressor state is per
  // bucket layout and starts afresh.
  if (b) poolResidual(*b, b->takeResidual());
  const trainer::Plan plan = plan_ ? *plan_ : auto_->startingPlan(job.index);
  b = std::make_unique<trainer::BucketSync>(job.index, job.layout, plan);
  if (!pendingLoad_.empty()) restoreSaved(*b, tensorsOf(job.layout));
  if (!pool_.empty()) {
    at::Tensor e = at::zeros({job.buffer.numel()}, at::kFloat);
    bool any = false;
    for (const auto& t : job.layout) {
      const auto it = pool_.find(t.name);
      if (it == pool_.end() || it->second.numel() != t.numel) continue;
      e.narrow(0, t.offset, t.numel).copy_(it->second);
      pool_.erase(it);
      any = true;
    }
    if (any) b->addResidual(e);
  }
  return *b;
}

void DdpHook::poolResidual(const trainer::BucketSync& from, const at::Tensor& e) {
  if (!e.defined()) return;
  for (const auto& t : from.layout()) pool_[t.name] = e.narrow(0, t.offset, t.numel).clone();
}

void DdpHook::restoreSaved(trainer::BucketSync& b, const std::string& tensors) {
  torch::serialize::InputArchive ar;
  std::istringstream in(pendingLoad_);
  ar.load_from(in);
  c10::IValue saved;
  if (!loaded_.count(b.index()) && ar.try_read(fmt::format("bucket{}/tensors", b.index()), saved) &&
      saved.toStringRef() == tensors) {
    b.load(ar);
    loaded_.insert(b.index());
    return;
  }
  // Another grouping than the saved one (DDP's initial buckets in a resumed
  // process): the saved residuals go to the pool by tensor name, once. Only
  // the model's parameter names identify a tensor across processes.
  if (!opts_.namedTensors || poolFilled_) return;
  poolFilled_ = true;
  for (int j = 0; ar.try_read(fmt::format("bucket{}/tensors", j), saved); ++j) {
    if (loaded_.count(j)) continue;
    std::vector<compress::TensorSlot> layout;
    const std::string& list = saved.toStringRef();
    int64_t offset = 0;
    for (size_t pos = 0, end; (end = list.find(';', pos)) != std::string::npos; pos = end + 1) {
      const std::string t = list.substr(pos, end - pos);
      const size_t bar = t.rfind('|');
      int64_t numel = 1;
      std::vector<int64_t> shape;
      for (size_t p = bar + 1, q; p < t.size(); p = q + 1) {
        q = std::min(t.find('x', p), t.size());
        shape.push_back(std::stoll(t.substr(p, q - p)));
        numel *= shape.back();
      }
      layout.push_back({t.substr(0, bar), shape, offset, numel});
      offset += numel;
    }
    trainer::BucketSync old(j, layout, b.plan());
    old.load(ar);
    poolResidual(old, old.takeResidual());
    loaded_.insert(j);
  }
}

void DdpHook::runJob(Job& job) {
  if (!agreed_) {
    checkPlansAgree();
    agreed_ = true;
  }
  auto& b = bucketFor(job);
  // Gloo and the compressors take float32; DDP's buffer has the parameters' dtype.
  at::Tensor flat = job.buffer.scalar_type() == at::kFloat && job.buffer.is_contiguous()
                        ? job.buffer
                        : job.buffer.to(at::kFloat).contiguous();
  if (!trainer::BucketSync::finiteOnEveryRank(flat, *comm_)) {
    const auto bad = b.nonFiniteTensors(flat);
    const std::string where = bad.empty() ? fmt::format("bucket {} on another rank", job.index)
                                          : fmt::format("rank {}: {}", comm_->rank(), fmt::join(bad, ", "));
    if (opts_.nanPolicy == "stop")
      throw NonFiniteGradient(fmt::format("step {}: non-finite gradient ({}); nan_policy is stop", step_, where));
    stepSkipped_ = true;
  }
  if (!stepSkipped_) {
    const auto run = b.run(flat, *comm_, opts_.seed, step_, auto_ && auto_->measuring());
    if (auto_) auto_->ran(job.index, run, flat);
    if (!flat.is_same(job.buffer)) job.buffer.copy_(flat);
  }
  // The last bucket completes after the step's bookkeeping (and under auto the
  // controller's turn), so the state is settled once DDP's backward returns;
  // under nan_policy skip every bucket waits for it, as a later bucket's NaN
  // skips the whole step.
  const bool last = job.last;
  if (last || opts_.nanPolicy == "skip") {
    std::lock_guard<std::mutex> lock(mu_);
    held_.push_back(std::move(job));
  } else {
    complete(job);
  }
  if (last) endStep();
}

void DdpHook::endStep() {
  // Anything thrown here leaves the step's buckets in held_, where loop()
  // fails their futures: DDP never waits on a future that nobody completes.
  const bool skipped = stepSkipped_;
  stepSkipped_ = false;
  if (skipped && skipRun_ + 1 > opts_.nanSkipMaxRun)
    throw NonFiniteGradient(fmt::format("step {}: {} steps in a row had a non-finite gradient, more than "
                                        "nan_skip_max_run = {} allows under nan_policy skip",
                                        step_, skipRun_ + 1, opts_.nanSkipMaxRun));
  if (!skipped && auto_) auto_->afterStep(step_);
  std::vector<Job> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(held_);
    lastSkipped_ = skipped;
    skipped_ += skipped;
    skipRun_ = skipped ? skipRun_ + 1 : 0;
    ++step_;
  }
  for (auto& j : done) {
    if (skipped) j.buffer.zero_();
    complete(j);
  }
}

int64_t DdpHook::step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_;
}
int64_t DdpHook::skippedSteps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return skipped_;
}
bool DdpHook::lastStepSkipped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lastSkipped_;
}
int DdpHook::numBuckets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(buckets_.size());
}
std::string DdpHook::planKey(int bucket) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (bucket < 0 || bucket >= static_cast<int>(buckets_.size()) || !buckets_[bucket]) return "";
  return buckets_[bucket]->key();
}

std::string DdpHook::save() const {
  std::lock_guard<std::mutex> lock(mu_);
  GZ_CHECK(inFlight_ == 0, "state_dict() between steps only: buckets are still in flight");
  torch::serialize::OutputArchive ar;
  ar.write("version", c10::IValue(int64_t{1}));
  ar.write("plan", c10::IValue(plan_ ? plan_->key() : std::string("auto")));
  ar.write("step", c10::IValue(step_));
  ar.write("skipped", c10::IValue(skipped_));
  for (const auto& b : buckets_) {
    if (!b) continue;
    b->save(ar);
    ar.write(fmt::format("bucket{}/tensors", b->index()), c10::IValue(tensorsOf(b->layout())));
  }
  if (auto_) auto_->save(ar);
  std::ostringstream out;
  ar.save_to(out);
  return out.str();
}

void DdpHook::load(const std::string& archive) {
  std::lock_guard<std::mutex> lock(mu_);
  GZ_CHECK(inFlight_ == 0, "load_state_dict() between steps only: buckets are still in flight");
  torch::serialize::InputArchive ar;
  try {
    std::istringstream in(archive);
    ar.load_from(in);
  } catch (const c10::Error& e) {
    throw UserError("load_state_dict: not a gradzip hook state (" + firstLine(e.what()) + ")");
  }
  c10::IValue version, plan, step, skipped;
  GZ_CHECK(ar.try_read("version", version) && version.isInt() && ar.try_read("plan", plan) && plan.isString(),
           "load_state_dict: not a gradzip hook state (no version or plan)");
  GZ_CHECK(version.toInt() == 1, "load_state_dict: state version {} is not the supported version 1", version.toInt());
  const std::string mine = plan_ ? plan_->key() : "auto";
  GZ_CHECK(plan.toStringRef() == mine, "load_state_dict: the state was saved under plan {}, this hook runs {}",
           plan.toStringRef(), mine);
  ar.read("step", step);
  ar.read("skipped", skipped);
  step_ = step.toInt();
  skipped_ = skipped.toInt();
  if (auto_) auto_->load(ar);
  pendingLoad_ = archive;
  loaded_.clear();
  poolFilled_ = false;
  pool_.clear();
  buckets_.clear();  // rebuilt, with their saved state, at their next run
}

}  // namespace gradzip::python
