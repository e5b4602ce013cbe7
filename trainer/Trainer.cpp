// Implements trainer/Trainer.h: setting up the run (model, data, optimizer,
// schedule, GradSync, controller), the training loop with its evaluations,
// checkpoints and early stop, and the cross-rank parameter check. The step,
// the TTA rows, the training state and the checkpoints are Trainer::Impl's
// other files (trainer/TrainerImpl.h).
#include "trainer/TrainerImpl.h"

#include "trainer/BuildInfo.h"
#include "trainer/Checkpoint.h"
#include "trainer/Device.h"
#include "trainer/Optimizer.h"
#include "trainer/OptimizerGeometry.h"
#include "util/Error.h"
#include "util/Hash.h"

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <unistd.h>

namespace gradzip::trainer {
namespace {
int envInt(const char* name, int def) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : def;
}
}  // namespace

void Trainer::Impl::setup() {
  // First: a device that cannot be had fails the run before any data is read.
  device = resolveDevice(cfg.run.device, envInt("LOCAL_RANK", 0), cfg.comm.cudaBackend == "gloo");
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
  model->to(device);  // before the optimizer exists, so its state is created there too
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

void Trainer::Impl::checkParametersAgree() {
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

void Trainer::Impl::updateProgressFile() {
  if (!progressFile.active()) return;
  try {
    progressFile.update(double(step) / double(train->stepsPerEpoch()));
  } catch (const UserError& e) {
    spdlog::warn("{}; the network schedule in epochs no longer follows this run", e.what());
    progressFile = ProgressFileWriter("");
  }
}

TrainResult Trainer::Impl::run(bool resume) {
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


Trainer::Trainer(TrainConfig cfg, comm::Communicator& comm) : impl_(std::make_unique<Impl>(std::move(cfg), comm)) {}
Trainer::~Trainer() = default;
TrainResult Trainer::run(bool resume) { return impl_->run(resume); }
void Trainer::observeSnapshots(StateObserver observer) { impl_->observer = std::move(observer); }

}  // namespace gradzip::trainer
