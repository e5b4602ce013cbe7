// `gradzip bench train`: single-worker training throughput (samples/s) of
// gradzip's models on one fixed synthetic batch of the real shapes: resnet*/
// vgg* and mlp on 1x28x28 Fashion-MNIST images with 10 classes, bert on
// sequences of --seq-len tokens from an 8000-token vocabulary (the text
// pipeline's default) with 15% of the positions as MLM targets. One step is
// zero_grad, forward, cross-entropy, backward and an SGD step (momentum 0.9,
// weight decay 5e-4), as in trainer/Trainer.cpp without communication. After
// --warmup steps, each of --steps steps is timed on its own, in wall-clock and
// in process CPU time; the reported rates are batch / median step time. With
// one thread on a shared machine the CPU-time rate is the robust one: it does
// not count the time the process waits for a core. experiments/python/
// throughput.py runs the same models in PyTorch with the same settings, and
// experiments/python/bench_train.py interleaves the two and prints the ratio.
#include "experiments/Benchmarks.h"

#include "data/Dataset.h"
#include "models/Registry.h"
#include "util/Error.h"
#include "util/Median.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>

namespace gradzip::experiments {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kVocab = 8000;   // data/DataOptions.h TextOptions::vocabSize
constexpr int64_t kClasses = 10;   // Fashion-MNIST
constexpr double kMaskProb = 0.15; // MLM targets per position

struct Batch {
  at::Tensor input, target;
};

models::ModelOptions optionsFor(const std::string& name, int64_t seqLen) {
  models::ModelOptions o;
  o.name = name;
  o.inChannels = 1;
  o.numClasses = kClasses;
  o.bert.vocabSize = kVocab;
  o.bert.maxLen = std::max<int64_t>(o.bert.maxLen, seqLen);
  o.mlp.inputSize = 28 * 28;
  return o;
}

// A fixed batch of the model's input shape; MLM targets are kIgnoreIndex
// except at ~15% of the positions, as the masked-LM dataset produces.
Batch syntheticBatch(const models::Model& model, int64_t batch, int64_t seqLen) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(20240611);
  if (model.kind() == models::ModelKind::kMaskedLm) {
    at::Tensor ids = at::randint(kVocab, {batch, seqLen}, gen, at::kLong);
    at::Tensor picked = at::rand({batch, seqLen}, gen) < kMaskProb;
    return {ids, at::where(picked, ids, at::full_like(ids, data::kIgnoreIndex))};
  }
  return {at::randn({batch, 1, 28, 28}, gen), at::randint(kClasses, {batch}, gen, at::kLong)};
}

at::Tensor lossOf(const models::Model& model, const at::Tensor& logits, const at::Tensor& target) {
  namespace F = torch::nn::functional;
  if (model.kind() == models::ModelKind::kMaskedLm)
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), target.reshape(-1),
                            F::CrossEntropyFuncOptions().ignore_index(data::kIgnoreIndex));
  return F::cross_entropy(logits, target);
}

// CPU seconds used by every thread of this process so far.
double processCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

int benchTrain(const BenchTrainArgs& args) {
  GZ_CHECK(args.steps >= 1 && args.warmup >= 0 && args.batch >= 1 && args.threads >= 1 && args.seqLen >= 1,
           "bench train: need --steps >= 1, --warmup >= 0, --batch >= 1, --seq-len >= 1, --threads >= 1");
  at::set_num_threads(args.threads);
  std::ofstream out;
  if (!args.out.empty()) {
    out.open(args.out, std::ios::app);
    GZ_CHECK(out.good(), "bench train: cannot append to {}", args.out);
  }
  fmt::print("{:<10} {:>6} {:>8} {:>12} {:>12} {:>10} {:>10} {:>10}\n", "model", "batch", "threads", "samples/s",
             "cpu samp/s", "median ms", "min ms", "max ms");
  for (const auto& name : args.models) {
    torch::manual_seed(1);
    auto model = models::makeModel(optionsFor(name, args.seqLen));
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9).weight_decay(5e-4));
    const Batch b = syntheticBatch(*model, args.batch, args.seqLen);
    // Per timed step: wall and CPU seconds, and CPU seconds of the three phases
    // (zero_grad + forward + loss, backward, SGD step) to locate a difference.
    std::vector<double> times, cpuTimes, fwd, bwd, opt;
    for (int i = 0; i < args.warmup + args.steps; ++i) {
      const double c0 = processCpuSeconds();
      const auto t0 = Clock::now();
      sgd.zero_grad();
      at::Tensor loss = lossOf(*model, model->forward(b.input), b.target);
      const double c1 = processCpuSeconds();
      loss.backward();
      const double c2 = processCpuSeconds();
      sgd.step();
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      const double c3 = processCpuSeconds();
      GZ_CHECK(std::isfinite(loss.item<double>()), "bench train: {} diverged (loss {})", name, loss.item<double>());
      if (i >= args.warmup) {
        times.push_back(dt);
        cpuTimes.push_back(c3 - c0);
        fwd.push_back(c1 - c0);
        bwd.push_back(c2 - c1);
        opt.push_back(c3 - c2);
      }
    }
    const double med = median(times), cpuMed = median(cpuTimes);
    const auto [lo, hi] = std::minmax_element(times.begin(), times.end());
    fmt::print("{:<10} {:>6} {:>8} {:>12.1f} {:>12.1f} {:>10.2f} {:>10.2f} {:>10.2f}\n", name, args.batch,
               args.threads, args.batch / med, args.batch / cpuMed, med * 1e3, *lo * 1e3, *hi * 1e3);
    if (out.is_open()) {
      nlohmann::json j = {{"bench", "train"},
                          {"impl", "gradzip"},
                          {"model", name},
                          {"batch", args.batch},
                          {"seq_len", args.seqLen},
                          {"threads", args.threads},
                          {"warmup", args.warmup},
                          {"steps", args.steps},
                          {"samples_per_s", args.batch / med},
                          {"cpu_samples_per_s", args.batch / cpuMed},
                          {"step_seconds", times},
                          {"step_cpu_seconds", cpuTimes},
                          {"phase_cpu_seconds", {{"forward", median(fwd)}, {"backward", median(bwd)},
                                                 {"optimizer", median(opt)}}},
                          {"parameters", models::parameterCount(*model)}};
      out << j.dump() << "\n";
      out.flush();
    }
  }
  return 0;
}

}  // namespace gradzip::experiments
