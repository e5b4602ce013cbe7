// Trainer::Impl's training step (trainer/TrainerImpl.h): one optimizer step
// through GradSync with its accounting (counters, TTA accumulators, sampled
// compression error), the loss-spike watch, and train.nan_policy with its
// bounds on skipped steps.
#include "trainer/TrainerImpl.h"

#include "trainer/Device.h"
#include "trainer/Evaluator.h"
#include "trainer/Optimizer.h"
#include "util/Error.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace gradzip::trainer {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

std::optional<Trainer::Impl::StepDone> Trainer::Impl::trainStep(bool exploring) {
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
  const data::Batch onHere = onDevice(std::move(*batch), device);
  auto logits = model->forward(onHere.input);
  auto loss = lossOf(*model, logits, onHere.target);
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
  done.samples = onHere.size() * comm.size();
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

void Trainer::Impl::checkSkipBound(double loss) {
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

StepMeasure Trainer::Impl::exploreStep() {
  for (;;)
    if (auto done = trainStep(true)) return done->measure;
}

void Trainer::Impl::watchLoss(double loss) {
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

}  // namespace gradzip::trainer
