// Trainer::Impl's training state (trainer/TrainerImpl.h): writing it to and
// reading it from an archive (checkpoints and the controller's in-memory
// snapshot share this format), snapshot/restore for the controller, and the
// same state read from the live objects as named tensors (Trainer.h
// StateTensors) for tests.
#include "trainer/TrainerImpl.h"

#include "trainer/Checkpoint.h"
#include "util/Error.h"

#include <sstream>

namespace gradzip::trainer {
namespace {
// An in-memory snapshot's compressor keys, one list per bucket (the bucket's
// index appended).
constexpr const char* kSnapshotKeys = "snapshot/compressor_keys/bucket";

// Every tensor of `ar` into `out` under prefix + its key, nested archives
// walked (each also named by an empty entry "prefix/key/": a compressor that
// keeps no tensors is there too); numbers as 0-d tensors, other values (a
// plan key) as the bytes of their printed form.
void archiveTensors(torch::serialize::InputArchive& ar, const std::string& prefix, StateTensors& out) {
  for (const auto& key : ar.keys()) {
    torch::serialize::InputArchive sub;
    if (ar.try_read(key, sub)) {
      out.emplace_back(prefix + key + "/", at::empty({0}));
      archiveTensors(sub, prefix + key + "/", out);
      continue;
    }
    c10::IValue v;
    ar.read(key, v);
    if (v.isTensor() || v.isDouble() || v.isInt() || v.isBool()) {
      out.emplace_back(prefix + key, v.isTensor()   ? v.toTensor()
                                     : v.isDouble() ? torch::tensor(v.toDouble(), torch::kDouble)
                                     : v.isInt()    ? torch::tensor(v.toInt(), torch::kLong)
                                                    : torch::tensor(v.toBool()));
      continue;
    }
    std::ostringstream printed;
    printed << v;
    const std::string text = printed.str();
    out.emplace_back(prefix + key, torch::tensor(std::vector<uint8_t>(text.begin(), text.end()), torch::kUInt8));
  }
}

// The tensors of what `save` writes (an object's own serialization), under `prefix`.
void savedTensors(const std::function<void(torch::serialize::OutputArchive&)>& save, const std::string& prefix,
                  StateTensors& out) {
  torch::serialize::OutputArchive o;
  save(o);
  std::ostringstream os;
  o.save_to(os);
  std::istringstream is(os.str());
  torch::serialize::InputArchive in;
  in.load_from(is);
  archiveTensors(in, prefix, out);
}
}  // namespace

void Trainer::Impl::writeState(torch::serialize::OutputArchive& ar) {
  {
    for (auto& kv : model->named_parameters()) ar.write("model/" + kv.key(), kv.value());
    for (auto& kv : model->named_buffers()) ar.write("buffer/" + kv.key(), kv.value(), true);
    torch::serialize::OutputArchive o;
    optimizer->save(o);
    ar.write("optimizer", o);
    torch::serialize::OutputArchive s;
    sync->save(s);
    ar.write("gradsync", s);
    const auto st = train->state();
    writeScalar(ar, "state/step", double(step));
    writeScalar(ar, "state/epoch", double(st.epoch));
    writeScalar(ar, "state/position", double(st.position));
    writeScalar(ar, "state/train_seconds", trainSeconds);
    writeScalar(ar, "state/samples", double(samples));
    writeScalar(ar, "state/bytes", double(bytes));
    writeScalar(ar, "state/best", best);
    writeScalar(ar, "state/evals_without_improvement", double(evalsWithoutImprovement));
    writeScalar(ar, "state/skipped_steps", double(skippedSteps));
    std::vector<double> accs;
    for (double* f : accumulatorFields()) accs.push_back(*f);
    ar.write("state/accumulators", torch::tensor(accs, torch::kDouble), true);
    std::vector<int64_t> counters;
    for (int64_t* f : counterFields()) counters.push_back(*f);
    ar.write("state/counters", torch::tensor(counters, torch::kLong), true);
    std::vector<int64_t> skips;
    for (int64_t* f : skipFields()) skips.push_back(*f);
    ar.write("state/skip_counters", torch::tensor(skips, torch::kLong), true);
    ar.write("rng/torch_cpu", at::detail::getDefaultCPUGenerator().get_state(), true);
  }
}

void Trainer::Impl::readState(torch::serialize::InputArchive& ar) {
  {
    torch::NoGradGuard g;
    for (auto& kv : model->named_parameters()) {
      torch::Tensor t;
      ar.read("model/" + kv.key(), t);
      kv.value().copy_(t);
    }
    for (auto& kv : model->named_buffers()) {
      torch::Tensor t;
      ar.read("buffer/" + kv.key(), t, true);
      kv.value().copy_(t);
    }
    torch::serialize::InputArchive o;
    ar.read("optimizer", o);
    // load() sets the per-parameter state the archive holds and leaves the
    // rest: a state from before the first step (no momentum yet) must not
    // keep the momentum of steps taken since.
    optimizer->state().clear();
    optimizer->load(o);
    torch::serialize::InputArchive s;
    ar.read("gradsync", s);
    sync->load(s);
    step = static_cast<int64_t>(readScalar(ar, "state/step"));
    data::SamplerState st;
    st.epoch = static_cast<int64_t>(readScalar(ar, "state/epoch"));
    st.position = static_cast<int64_t>(readScalar(ar, "state/position"));
    train->restore(st);
    trainSeconds = readScalar(ar, "state/train_seconds");
    samples = static_cast<int64_t>(readScalar(ar, "state/samples"));
    bytes = static_cast<int64_t>(readScalar(ar, "state/bytes"));
    best = readScalar(ar, "state/best");
    evalsWithoutImprovement = static_cast<int64_t>(readScalar(ar, "state/evals_without_improvement"));
    skippedSteps = static_cast<int64_t>(readScalar(ar, "state/skipped_steps"));
    torch::Tensor accs, counters;
    ar.read("state/accumulators", accs, true);
    ar.read("state/counters", counters, true);
    auto af = accumulatorFields();
    auto cf = counterFields();
    GZ_CHECK(accs.numel() == int64_t(af.size()) && counters.numel() == int64_t(cf.size()),
             "checkpoint in {}: accumulators have an unexpected size (written by another gradzip version?)",
             rankDir());
    for (size_t i = 0; i < af.size(); ++i) *af[i] = accs[i].item<double>();
    for (size_t i = 0; i < cf.size(); ++i) *cf[i] = counters[i].item<int64_t>();
    torch::Tensor skips;
    auto sf = skipFields();
    if (ar.try_read("state/skip_counters", skips, true) && skips.numel() == int64_t(sf.size())) {
      for (size_t i = 0; i < sf.size(); ++i) *sf[i] = skips[i].item<int64_t>();
    } else {
      for (int64_t* f : sf) *f = 0;
      accFiniteLosses = accSteps;  // an older checkpoint: its loss sum counted every step
    }
    torch::Tensor rng;
    ar.read("rng/torch_cpu", rng, true);
    auto gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(rng);
  }
}

std::string Trainer::Impl::snapshot() {
  if (observer) observer("snapshot", step, liveState());
  torch::serialize::OutputArchive ar;
  writeState(ar);
  // The compressor states that exist now, which restore() keeps: a
  // checkpoint file has no use for them (a resumed run starts with none).
  const auto keys = sync->compressorKeys();
  for (size_t k = 0; k < keys.size(); ++k) {
    c10::List<std::string> bucket;
    for (const auto& key : keys[k]) bucket.push_back(key);
    ar.write(fmt::format("{}{}", kSnapshotKeys, k), c10::IValue(bucket));
  }
  std::ostringstream os;
  ar.save_to(os);
  return os.str();
}

void Trainer::Impl::restore(const std::string& snap) {
  std::istringstream is(snap);
  torch::serialize::InputArchive ar;
  ar.load_from(is);
  // The compressor states made since the snapshot (the plans explored or
  // undone) are dropped before the state is read back: no trace of them
  // stays, and the plan now running is built afresh where the snapshot has
  // none of it (GradSync::load).
  std::vector<std::vector<std::string>> keys(size_t(sync->numBuckets()));
  for (size_t k = 0; k < keys.size(); ++k) {
    c10::IValue bucket;
    GZ_ASSERT(ar.try_read(fmt::format("{}{}", kSnapshotKeys, k), bucket) && bucket.isList(),
              "restore: the snapshot lacks the compressor keys of bucket {}", k);
    for (const auto& key : bucket.toListRef()) keys[k].push_back(key.toStringRef());
  }
  sync->keepOnly(keys);
  if (observer) observer("before_restore", step, liveState());
  readState(ar);
  if (observer) observer("restored", step, liveState());
}

StateTensors Trainer::Impl::liveState() {
  StateTensors out;
  for (auto& kv : model->named_parameters()) out.emplace_back("model/" + kv.key(), kv.value().detach().clone());
  for (auto& kv : model->named_buffers()) out.emplace_back("buffer/" + kv.key(), kv.value().detach().clone());
  auto& groups = optimizer->param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string group = fmt::format("optimizer/group{}/", g);
    savedTensors([&](auto& o) { groups[g].options().serialize(o); }, group + "options/", out);
    const auto& params = groups[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string prefix = fmt::format("{}param{}/", group, i);
      const auto it = optimizer->state().find(params[i].unsafeGetTensorImpl());
      if (it == optimizer->state().end())
        out.emplace_back(prefix + "none", torch::empty({0}));  // no step yet: no momentum
      else
        savedTensors([&](auto& o) { it->second->serialize(o); }, prefix, out);
    }
  }
  savedTensors([&](auto& o) { sync->save(o); }, "gradsync/", out);
  out.emplace_back("gradsync/residual_norm", torch::tensor(sync->residualNorm(), torch::kDouble));
  std::vector<double> progress = {double(step), double(samples), double(bytes), trainSeconds, best,
                                  double(evalsWithoutImprovement), double(skippedSteps)};
  for (double* f : accumulatorFields()) progress.push_back(*f);
  for (int64_t* f : counterFields()) progress.push_back(double(*f));
  for (int64_t* f : skipFields()) progress.push_back(double(*f));
  out.emplace_back("progress/fields", torch::tensor(progress, torch::kDouble));
  const auto st = train->state();
  out.emplace_back("data/epoch", torch::tensor(st.epoch, torch::kLong));
  out.emplace_back("data/position", torch::tensor(st.position, torch::kLong));
  out.emplace_back("rng/torch_cpu", at::detail::getDefaultCPUGenerator().get_state());
  return out;
}

}  // namespace gradzip::trainer
