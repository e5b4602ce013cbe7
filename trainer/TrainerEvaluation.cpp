// Trainer::Impl's evaluation bookkeeping (trainer/TrainerImpl.h): evaluates
// the model, turns the accumulators since the previous row into a TTA row
// (trainer/TtaLog.h), resets them, and decides early stopping by patience.
#include "trainer/TrainerImpl.h"

#include "trainer/Evaluator.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace gradzip::trainer {

std::string Trainer::Impl::planSummary() const {
  std::vector<std::string> keys;
  for (int k = 0; k < sync->numBuckets(); ++k) {
    const auto key = sync->plan(k).key();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return fmt::format("{}", fmt::join(keys, ";"));
}

bool Trainer::Impl::evaluateAndLog() {
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

}  // namespace gradzip::trainer
