// Implements trainer/Trainer.h.
#include "trainer/Trainer.h"

#include "data/Factory.h"
#include "models/Registry.h"
#include "trainer/BuildInfo.h"
#include "util/Hash.h"
#include "trainer/Checkpoint.h"
#include "controller/Controller.h"
#include "trainer/Evaluator.h"
#include "sync/GradSync.h"
#include "trainer/LrSchedule.h"
#include "trainer/Optimizer.h"
#include "trainer/OptimizerGeometry.h"
#include "trainer/Progress.h"
#include "launch/ProgressFile.h"
#include "trainer/TtaLog.h"
#include "util/Error.h"

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace gradzip::trainer {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int envInt(const char* name, int def) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : def;
}

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

struct Trainer::Impl final : ControlledLoop {
  TrainConfig cfg;
  comm::Communicator& comm;
  std::shared_ptr<models::Model> model;
  data::Datasets datasets;
  std::unique_ptr<data::DataLoader> train, eval;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<GradSync> sync;
  std::unique_ptr<Controller> controller;  // compress: auto
  std::unique_ptr<TtaLog> tta;
  std::unique_ptr<Progress> progress;
  ProgressFileWriter progressFile{""};  // rank 0 under an epoch rate schedule (launch/ProgressFile.h)
  int64_t totalSteps = 0;

  // Progress state (checkpointed).
  int64_t step = 0;
  double trainSeconds = 0;
  double controllerStartSeconds = 0;  // Controller::start's probe, charged when training starts
  int64_t samples = 0;
  int64_t bytes = 0;
  double best = -INFINITY;
  int64_t evalsWithoutImprovement = 0;
  int64_t skippedSteps = 0;
  std::map<std::string, double> lastMetrics;

  // Accumulated since the last TTA row.
  StepBreakdown acc;
  double lossSum = 0;
  int64_t accSteps = 0;
  // Compression error on this rank, ||x_e − x_c||² and ||x_e||², summed over
  // the steps GradSync measured (every kVnmseEvery-th, or all with the controller).
  double errorSq = 0, inputSq = 0;
  static constexpr int64_t kVnmseEvery = 10;
  int64_t lossSpikes = 0;
  // Cumulative over the run.
  int64_t saturated = 0;
  // Running mean of the loss for spike detection (train.loss_spike_factor).
  double lossEma = 0;
  int64_t lossEmaSteps = 0;

  // The accumulators above, in checkpoint order: a resumed run writes the same
  // TTA rows as an uninterrupted one even when checkpoints fall between rows.
  std::vector<double*> accumulatorFields() {
    return {&acc.dataWait, &acc.compute, &acc.encode, &acc.communicate, &acc.decode, &acc.exposed,
            &acc.optimizer, &acc.step, &lossSum, &lossEma, &errorSq, &inputSq};
  }
  std::vector<int64_t*> counterFields() { return {&accSteps, &lossSpikes, &saturated, &lossEmaSteps}; }
  // train.nan_policy: skip's accounting since the last TTA row (skipped steps,
  // non-finite and finite losses) and the current run of skipped steps. Kept
  // apart from counterFields so that checkpoints written before these
  // existed still load (they read as zeros).
  int64_t accSkipped = 0, accNonFinite = 0, accFiniteLosses = 0, skippedInRow = 0;
  std::vector<int64_t*> skipFields() { return {&accSkipped, &accNonFinite, &accFiniteLosses, &skippedInRow}; }

  // Warns about and counts a step whose loss jumps above lossSpikeFactor times
  // the running mean (an exponential moving average over ~20 steps, after 20
  // steps of warm-up). Non-finite losses are the NaN policy's business.
  void watchLoss(double loss) {
    if (cfg.train.lossSpikeFactor <= 0 || !std::isfinite(loss)) return;
    constexpr int64_t kWarmup = 20;
    constexpr double kAlpha = 0.05;
    if (lossEmaSteps >= kWarmup && loss > cfg.train.lossSpikeFactor * lossEma && lossEma > 0) {
      ++lossSpikes;
      spdlog::warn("step {}: loss spike: {:.4g} is {:.1f}x the running mean {:.4g} (train.loss_spike_factor {})",
                   step, loss, loss / lossEma, lossEma, cfg.train.lossSpikeFactor);
    }
    lossEma = lossEmaSteps == 0 ? loss : (1 - kAlpha) * lossEma + kAlpha * loss;
    ++lossEmaSteps;
  }

  Impl(TrainConfig c, comm::Communicator& cm) : cfg(std::move(c)), comm(cm) {}

  std::string rankDir() const { return fmt::format("{}/rank{}", cfg.runDir(), comm.rank()); }

  void setup() {
    const int local = std::max(1, envInt("LOCAL_WORLD_SIZE", comm.size()));
    int threads = cfg.run.threads > 0 ? cfg.run.threads
                                       : std::max(1, int(std::thread::hardware_concurrency()) / local);
    if (cfg.run.deterministic) {
      threads = 1;
      at::globalContext().setDeterministicAlgorithms(true, false);
    }
    torch::set_num_threads(threads);
    datasets = data::makeDatasets(cfg.data);
    const auto info = datasets.train->info();
    if (info.kind == "image") {
      if (!cfg.modelChannelsSet) cfg.model.inChannels = info.channels;
      if (!cfg.modelClassesSet) cfg.model.numClasses = info.numClasses;
      if (cfg.model.name == "mlp" && !cfg.modelChannelsSet) cfg.model.mlp.inputSize = info.channels * info.height * info.width;
    } else if (!cfg.modelVocabSet) {
      cfg.model.bert.vocabSize = info.vocabSize;
    }
    {
      // Seeding and initialising under one process-wide lock: ranks that are
      // threads of one process (the tests) share the default generator, and
      // interleaved draws would make rank 0's initial parameters vary.
      static std::mutex initMutex;
      std::lock_guard<std::mutex> lock(initMutex);
      torch::manual_seed(cfg.run.seed);
      model = models::makeModel(cfg.model);
    }
    spdlog::info("model {}: {} parameters; data: {}", cfg.model.name, models::parameterCount(*model),
                 datasets.train->describe());

    // Every rank starts from rank 0's parameters and buffers.
    {
      torch::NoGradGuard g;
      std::vector<comm::Work> works;
      for (auto& p : model->parameters()) works.push_back(comm.broadcast(p, 0));
      for (auto& b : model->buffers())
        if (b.is_contiguous()) works.push_back(comm.broadcast(b, 0));
      comm::waitAll(works);
    }

    train = std::make_unique<data::DataLoader>(datasets.train, comm.rank(), comm.size(),
                                               data::trainLoaderOptions(cfg.data, cfg.run.seed));
    if (datasets.test)
      eval = std::make_unique<data::DataLoader>(datasets.test, comm.rank(), comm.size(),
                                                data::evalLoaderOptions(cfg.data, cfg.run.seed));
    const int64_t perEpoch = train->stepsPerEpoch();
    totalSteps = cfg.train.epochs > 0 ? static_cast<int64_t>(std::ceil(cfg.train.epochs * perEpoch)) : 0;
    if (cfg.train.maxSteps > 0) totalSteps = totalSteps > 0 ? std::min(totalSteps, cfg.train.maxSteps) : cfg.train.maxSteps;

    const double lr = scaledLr(cfg.optim, comm.size());
    optimizer = makeOptimizer(model->parameters(), cfg.optim, lr);
    schedule = std::make_unique<LrSchedule>(cfg.schedule, lr, totalSteps, perEpoch);

    GradSyncOptions so;
    so.bucketBytes = bucketBytesFor(cfg.plan, static_cast<int64_t>(cfg.comm.bucketMb * 1048576.0),
                                    cfg.controller.has_value());
    so.seed = cfg.run.seed;
    so.overlap = cfg.comm.overlap;
    auto named = model->named_parameters();
    std::vector<std::pair<std::string, torch::Tensor>> params;
    for (auto& kv : named) params.emplace_back(kv.key(), kv.value());
    sync = std::make_unique<GradSync>(params, comm, so, cfg.plan);
    if (cfg.controller) {
      if (comm.size() >= 2) {
        controller = std::make_unique<Controller>(*cfg.controller, comm, *sync, cfg.runDir());
        controller->setGeometry([this](const torch::Tensor& p) { return updateScale(*optimizer, p); });
        controller->setBatch(cfg.data.batchSize);
        controllerStartSeconds = controller->start(0);
      } else {
        spdlog::warn("compress: auto chooses among collectives and needs at least 2 ranks; one rank runs {}",
                     cfg.plan.key());
      }
    }
    progress = std::make_unique<Progress>(comm.rank() == 0, totalSteps, perEpoch, isatty(STDERR_FILENO) != 0);
    if (comm.rank() == 0) progressFile = ProgressFileWriter::fromEnv();
  }

  // The whole training state: model, buffers, optimizer, compressor state,
  // progress, accumulators, data position and RNG. Checkpoints write it to a
  // file (with the controller's state); the controller's exploration keeps it
  // in memory (snapshot/restore).
  void writeState(torch::serialize::OutputArchive& ar) {
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

  void saveCheckpoint() {
    writeCheckpoint(rankDir(), step, [&](torch::serialize::OutputArchive& ar) {
      writeState(ar);
      if (controller) controller->save(ar);
    });
  }

  std::string snapshot() override {
    if (observer) observer("snapshot", step, liveState());
    torch::serialize::OutputArchive ar;
    writeState(ar);
    std::ostringstream os;
    ar.save_to(os);
    return os.str();
  }

  void restore(const std::string& snap) override {
    if (observer) observer("before_restore", step, liveState());
    std::istringstream is(snap);
    torch::serialize::InputArchive ar;
    ar.load_from(is);
    readState(ar);
    if (observer) observer("restored", step, liveState());
  }

  StateObserver observer;  // tests (Trainer::observeSnapshots)

  // The state writeState() keeps, read from the objects that hold it
  // (Trainer.h StateTensors).
  StateTensors liveState() {
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

  // Picks the checkpoint every rank resumes from. Ranks checkpoint at the same
  // steps but a kill can land between two ranks' writes, so one rank's newest
  // may be a step ahead of another's; each keeps its previous checkpoint, and
  // all resume from the newest step that every rank holds. Returns this rank's
  // file for that step, or "" when no rank has a checkpoint.
  std::string agreeOnCheckpoint() {
    // A rank whose checkpoints are all invalid says so in the exchange (-2)
    // instead of throwing before it: its peers would otherwise fail waiting
    // for it and be reported in its place.
    std::vector<CheckpointFile> mine;
    std::string invalid;
    try {
      mine = validCheckpoints(rankDir());  // newest first
    } catch (const UserError& e) {
      invalid = e.what();
    }
    auto steps = torch::full({2}, invalid.empty() ? -1.0 : -2.0, torch::kDouble);  // at most two valid ones
    for (size_t i = 0; i < mine.size(); ++i) steps[i] = double(mine[i].step);
    std::vector<at::Tensor> all;
    for (int r = 0; r < comm.size(); ++r) all.push_back(torch::empty({2}, torch::kDouble));
    comm.allGather(all, steps).wait();
    for (int r = 0; r < comm.size(); ++r) {
      if (all[r][0].item<double>() != -2.0) continue;
      GZ_CHECK(invalid.empty(), "cannot resume: rank {}: {}; without it the ranks share no checkpoint: rerun "
               "with --overwrite to start afresh", comm.rank(), invalid);
      // Rank r's failure, seen here: a CommError (exit code 3), which
      // `gradzip launch` reports as following from rank r's own.
      throw CommError(fmt::format("rank {}: cannot resume: rank {} has no valid checkpoint in {}/rank{}/ (all are "
                                  "truncated or corrupt; see its error)", comm.rank(), r, cfg.runDir(), r));
    }
    auto describe = [&](int r) {
      const double a = all[r][0].item<double>(), b = all[r][1].item<double>();
      return a < 0 ? std::string("none") : b < 0 ? fmt::format("step {}", a) : fmt::format("steps {} and {}", a, b);
    };
    int64_t target = std::numeric_limits<int64_t>::max();
    bool anyHas = false;
    for (int r = 0; r < comm.size(); ++r) {
      const double newest = all[r][0].item<double>();
      anyHas |= newest >= 0;
      if (newest >= 0) target = std::min(target, int64_t(newest));
    }
    if (!anyHas) return "";
    // A rank without any checkpoint fails the check below (target is never -1).
    for (int r = 0; r < comm.size(); ++r) {
      const bool has = all[r][0].item<double>() == double(target) || all[r][1].item<double>() == double(target);
      GZ_CHECK(has,
               "cannot resume: the ranks hold no common checkpoint step (rank {} has {}, while some rank's newest is "
               "step {}; checkpoints are in {}/rank<r>/); delete the run directory to start afresh",
               r, describe(r), target, cfg.runDir());
    }
    for (const auto& f : mine) {
      if (f.step != target) continue;
      if (f.step != mine[0].step)
        spdlog::warn("resuming from the previous checkpoint (step {}): another rank had not yet written step {} "
                     "when the run stopped", f.step, mine[0].step);
      return f.path;
    }
    GZ_ASSERT(false, "agreed checkpoint step not found locally");
  }

  bool loadCheckpoint() {
    const std::string path = agreeOnCheckpoint();
    if (path.empty()) return false;
    const bool loaded = loadCheckpointFile(path, [&](torch::serialize::InputArchive& ar) {
      if (controller) controller->load(ar);  // the plan first: GradSync loads that plan's state
      readState(ar);
    });
    GZ_CHECK(loaded, "rank {}: checkpoint {} became unreadable while resuming", comm.rank(), path);
    spdlog::info("resumed from {} at step {} ({:.1f} s of training)", path, step, trainSeconds);
    return true;
  }

  void readState(torch::serialize::InputArchive& ar) {
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

  void checkParametersAgree() {
    torch::NoGradGuard g;
    double sum = 0, weighted = 0;
    int64_t i = 0;
    for (auto& p : model->parameters()) {
      const double s = p.sum().item<double>();
      sum += s;
      weighted += s * double(++i);
    }
    auto mine = torch::tensor({sum, weighted}, torch::kDouble);
    std::vector<at::Tensor> all;
    for (int r = 0; r < comm.size(); ++r) all.push_back(torch::empty({2}, torch::kDouble));
    comm.allGather(all, mine).wait();
    for (int r = 0; r < comm.size(); ++r)
      GZ_CHECK(torch::equal(all[r], all[0]),
               "step {}: parameters differ across ranks (checksum of rank {} {:.17g} vs rank 0 {:.17g}); the ranks "
               "have diverged",
               step, r, all[r][0].item<double>(), all[0][0].item<double>());
  }

  // Tells an emulated launch with an epoch rate schedule how far training got.
  // A failed write costs the schedule its precision, not the run: one warning.
  void updateProgressFile() {
    if (!progressFile.active()) return;
    try {
      progressFile.update(double(step) / double(train->stepsPerEpoch()));
    } catch (const UserError& e) {
      spdlog::warn("{}; the network schedule in epochs no longer follows this run", e.what());
      progressFile = ProgressFileWriter("");
    }
  }

  // The plans in use, in bucket order without repeats ("fp16@engine" when
  // every bucket runs one plan; "thc{bits: 4}@ps;fp16@engine" with the
  // controller's small-bucket plan).
  std::string planSummary() const {
    std::vector<std::string> keys;
    for (int k = 0; k < sync->numBuckets(); ++k) {
      const auto key = sync->plan(k).key();
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
    return fmt::format("{}", fmt::join(keys, ";"));
  }

  // Writes a TTA row; returns true when early stopping triggers.
  bool evaluateAndLog() {
    std::map<std::string, double> metrics;
    if (eval) metrics = evaluate(*model, *eval, comm, cfg.train.evalBatches);
    TtaRow row;
    row.trainSeconds = trainSeconds;
    row.step = step;
    row.epoch = double(step) / double(train->stepsPerEpoch());
    row.samples = samples;
    // The mean of the finite losses; NaN when every step's loss was
    // non-finite, so a dead model never shows as a loss of 0.
    row.loss = accFiniteLosses ? lossSum / double(accFiniteLosses) : accSteps ? NAN : 0;
    row.skippedSteps = accSkipped;
    row.nonFiniteLosses = accNonFinite;
    row.metrics = metrics;
    row.lr = schedule->at(std::max<int64_t>(0, step - 1));
    row.plan = planSummary();
    row.bytes = bytes;
    row.saturated = saturated;
    row.lossSpikes = lossSpikes;
    row.residualNorm = sync->residualNorm();
    row.vnmse = inputSq > 0 ? errorSq / inputSq : NAN;
    if (accSteps) {
      const double k = double(accSteps);
      row.breakdown = {acc.dataWait / k, acc.compute / k, acc.encode / k, acc.communicate / k,
                       acc.decode / k,   acc.exposed / k, acc.optimizer / k, acc.step / k};
    }
    if (tta) tta->write(row);
    lastMetrics = metrics;
    progress->evaluation(row);
    acc = {};
    lossSum = 0;
    accSteps = 0;
    accSkipped = accNonFinite = accFiniteLosses = 0;
    errorSq = inputSq = 0;
    lossSpikes = 0;

    const std::string key = primaryMetric(model->kind());
    if (!metrics.count(key) || cfg.train.patience == 0) {
      if (metrics.count(key)) best = std::max(best, metrics[key]);
      return false;
    }
    if (metrics[key] > best) {
      best = metrics[key];
      evalsWithoutImprovement = 0;
      return false;
    }
    return ++evalsWithoutImprovement >= cfg.train.patience;
  }

  struct StepDone {
    StepMeasure measure;
    double loss = 0;
    int64_t samples = 0;  // over all ranks
  };

  // One optimizer step with its accounting (step counter, samples, bytes,
  // TTA accumulators, loss watch). nullopt when the data ran out: the next
  // epoch has been started and no step was taken. While exploring, a
  // non-finite gradient propagates (the controller drops the candidate);
  // otherwise the NaN policy applies.
  std::optional<StepDone> trainStep(bool exploring) {
    const auto tStep = Clock::now();
    auto batch = train->next();
    if (!batch) {
      train->startEpoch(train->state().epoch + 1);
      return std::nullopt;
    }
    const double dataWait = train->lastWaitSeconds();
    const double lr = schedule->at(step);
    setLearningRate(*optimizer, lr);
    optimizer->zero_grad();
    const bool measure = controller || step % kVnmseEvery == 0;
    sync->setMeasureCompression(measure);
    sync->beginStep(step);
    const auto tCompute = Clock::now();
    auto logits = model->forward(batch->input);
    auto loss = lossOf(*model, logits, batch->target);
    loss.backward();
    const double compute = since(tCompute);
    SyncBreakdown bd;
    bool skip = false;
    try {
      bd = sync->finishStep();
    } catch (const NonFiniteGradient& e) {
      if (exploring) throw;
      if (cfg.train.nanPolicy == "stop")
        throw UserError(fmt::format("{} (train.nan_policy: stop; use skip to drop such steps)", e.what()));
      spdlog::warn("{}; skipping this step (train.nan_policy: skip)", e.what());
      skip = true;
      ++skippedSteps;
      ++accSkipped;
    }
    skippedInRow = skip ? skippedInRow + 1 : 0;
    const auto tOpt = Clock::now();
    if (!skip) {
      if (cfg.train.clipGradNorm > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), cfg.train.clipGradNorm);
      optimizer->step();
    }
    const double optTime = since(tOpt);
    const double lossValue = loss.item<double>();
    ++step;
    StepDone done;
    done.samples = batch->size() * comm.size();
    samples += done.samples;
    bytes += bd.bytesSent;
    saturated += bd.saturated;
    const double stepTime = since(tStep);
    trainSeconds += stepTime;
    acc.dataWait += dataWait;
    acc.compute += compute;
    acc.encode += bd.encode;
    acc.communicate += bd.communicate;
    acc.decode += bd.decode;
    acc.exposed += bd.exposed;
    acc.optimizer += optTime;
    acc.step += stepTime;
    if (std::isfinite(lossValue)) {
      lossSum += lossValue;
      ++accFiniteLosses;
    } else {
      ++accNonFinite;
    }
    ++accSteps;
    if (skip) checkSkipBound(lossValue);
    if (measure && !skip)
      for (int k = 0; k < sync->numBuckets(); ++k) {
        errorSq += sync->lastStats(k).errorSq;
        inputSq += sync->lastStats(k).inputSq;
      }
    if (!exploring) watchLoss(lossValue);
    done.loss = lossValue;
    done.measure = {stepTime, compute, bd.exposed, bd.encode, bd.communicate, bd.decode};
    return done;
  }

  // train.nan_policy: skip drops a step with a non-finite gradient, which
  // helps past a rare overflow but not a diverged model (every later step is
  // skipped too). Stops the run when the skipped steps exceed either bound
  // (the ranks count the same steps, so all stop at the same one).
  void checkSkipBound(double loss) {
    const auto& t = cfg.train;
    const std::string advice = "the model has diverged; lower optim.lr or set train.clip_grad_norm, and rerun "
                               "(--overwrite) or resume from a checkpoint before the divergence";
    if (skippedInRow > t.nanSkipMaxRun)
      throw UserError(fmt::format("step {}: {} steps in a row had non-finite gradients (last loss {}), more than "
                                  "train.nan_skip_max_run = {} allows under train.nan_policy: skip; {}",
                                  step, skippedInRow, loss, t.nanSkipMaxRun, advice));
    if (skippedSteps > t.nanSkipMaxRun && double(skippedSteps) > t.nanSkipMaxShare * double(step))
      throw UserError(fmt::format("step {}: {} of {} steps were skipped for non-finite gradients ({:.0f}%), more "
                                  "than train.nan_skip_max_share = {} allows under train.nan_policy: skip; {}",
                                  step, skippedSteps, step, 100.0 * double(skippedSteps) / double(step),
                                  t.nanSkipMaxShare, advice));
  }

  StepMeasure exploreStep() override {
    for (;;)
      if (auto done = trainStep(true)) return done->measure;
  }

  TrainResult run(bool resume) {
    setup();
    std::filesystem::create_directories(cfg.runDir());
    if (comm.rank() == 0) {
      YAML::Emitter e;
      e << cfg.toYaml();
      std::ofstream(cfg.runDir() + "/config.yaml") << "# effective config of " << cfg.source
                                                   << " (defaults filled in)\n" << e.c_str() << "\n";
      nlohmann::json env = {{"gradzip_version", gradzipVersion()},
                            {"git_revision", gitRevision()},
                            {"executable_fingerprint", fileFingerprint("/proc/self/exe")},
                            {"torch_version", torchVersion()},
                            {"world_size", comm.size()},
                            {"backend", comm.backendName()},
                            {"intra_op_threads", at::get_num_threads()},
                            {"hardware_threads", std::thread::hardware_concurrency()},
                            {"config_fingerprint", cfg.fingerprint()},
                            {"plan", cfg.controller ? std::string("auto") : cfg.plan.key()},
                            {"network", std::getenv("GRADZIP_NETWORK") ? std::getenv("GRADZIP_NETWORK") : "host"},
                            {"latency_us", cfg.comm.latencyUs}};
      std::ofstream(cfg.runDir() + "/environment.json") << env.dump(2) << "\n";
    }
    bool resumed = resume && loadCheckpoint();
    if (resumed && controller) controller->resumed(step);
    // The controller's start-up probe is training time too (after a resume,
    // on top of the time restored from the checkpoint): a static plan has none.
    trainSeconds += controllerStartSeconds;
    if (comm.rank() == 0) tta = std::make_unique<TtaLog>(cfg.runDir(), resumed ? step : -1);
    if (!resumed) train->startEpoch(0);
    if (controller) trainSeconds += controller->begin(step, *this);

    TrainResult result;
    model->train();
    const int64_t evalEvery = cfg.train.evalEvery > 0 ? cfg.train.evalEvery : train->stepsPerEpoch();
    const int64_t ckptEvery = cfg.train.checkpointEvery > 0 ? cfg.train.checkpointEvery : evalEvery;
    bool stop = false;
    while (step < totalSteps && !stop) {
      const auto done = trainStep(false);
      if (!done) continue;  // an epoch ended
      progress->step(step, done->loss, double(done->samples) / done->measure.step, skippedSteps);
      updateProgressFile();
      if (controller) {
        const int64_t before = step;
        const double deciding = controller->afterStep(step, done->measure, *this);
        trainSeconds += deciding;  // exploration is training time (its steps are undone, its time is not)
        if (step < before) continue;  // the provisional step undid the warm-up's steps: nothing to evaluate
        if (controller->mayRewind() && step < totalSteps) continue;  // steps it may still undo
      }
      if (cfg.train.checksumEvery > 0 && step % cfg.train.checksumEvery == 0) checkParametersAgree();
      const bool last = step == totalSteps;
      if (step % evalEvery == 0 || last) {
        stop = evaluateAndLog();
        if (stop) {
          spdlog::info("early stop at step {}: no improvement in {} evaluations", step, cfg.train.patience);
          result.earlyStopped = true;
        }
      }
      if (step % ckptEvery == 0 || last || stop) saveCheckpoint();
    }
    if (controller) controller->finish();
    progress->finish();
    if (progressFile.active()) {
      try {
        progressFile.flush();
      } catch (const UserError& e) {
        spdlog::warn("{}", e.what());
      }
    }
    result.steps = step;
    result.trainSeconds = trainSeconds;
    result.finalMetrics = lastMetrics;
    if (comm.rank() == 0) {
      std::vector<std::pair<std::string, torch::Tensor>> weights;
      for (auto& kv : model->named_parameters()) weights.emplace_back(kv.key(), kv.value());
      for (auto& kv : model->named_buffers()) weights.emplace_back(kv.key(), kv.value());
      exportStateDict(cfg.runDir() + "/model.pt", weights);
    }
    return result;
  }
};

Trainer::Trainer(TrainConfig cfg, comm::Communicator& comm) : impl_(std::make_unique<Impl>(std::move(cfg), comm)) {}
Trainer::~Trainer() = default;
TrainResult Trainer::run(bool resume) { return impl_->run(resume); }
void Trainer::observeSnapshots(StateObserver observer) { impl_->observer = std::move(observer); }

}  // namespace gradzip::trainer
