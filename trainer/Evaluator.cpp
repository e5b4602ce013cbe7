// Implements trainer/Evaluator.h.
#include "trainer/Evaluator.h"

#include "trainer/Device.h"

#include <torch/torch.h>

#include <cmath>

namespace gradzip::trainer {

at::Tensor lossOf(models::Model& model, const at::Tensor& logits, const at::Tensor& target) {
  if (model.kind() == models::ModelKind::kMaskedLm)
    return torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), target.reshape(-1),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(data::kIgnoreIndex));
  return torch::nn::functional::cross_entropy(logits, target);
}

std::string primaryMetric(models::ModelKind kind) {
  return kind == models::ModelKind::kMaskedLm ? "mlm_accuracy" : "accuracy";
}

std::map<std::string, double> evaluate(models::Model& model, data::DataLoader& loader, comm::Communicator& comm,
                                       int64_t maxBatches) {
  torch::NoGradGuard noGrad;
  const bool wasTraining = model.is_training();
  model.eval();
  const bool mlm = model.kind() == models::ModelKind::kMaskedLm;
  // sums: [loss * count, correct top-1, correct top-5, count]
  double lossSum = 0, top1 = 0, top5 = 0, count = 0;
  loader.startEpoch(0);
  int64_t batches = 0;
  const torch::Device device = model.parameters().empty() ? torch::Device(torch::kCPU) : model.parameters().front().device();
  while (auto next = loader.next()) {
    if (maxBatches > 0 && batches++ >= maxBatches) break;
    const data::Batch batch = onDevice(std::move(*next), device);
    auto logits = model.forward(batch.input);
    if (mlm) {
      auto flat = logits.reshape({-1, logits.size(-1)});
      auto target = batch.target.reshape(-1);
      auto mask = target.ne(data::kIgnoreIndex);
      const double n = mask.sum().item<double>();
      if (n == 0) continue;
      auto sel = flat.index({mask});
      auto tgt = target.index({mask});
      lossSum += torch::nn::functional::cross_entropy(sel, tgt).item<double>() * n;
      top1 += sel.argmax(1).eq(tgt).sum().item<double>();
      count += n;
    } else {
      const double n = batch.size();
      lossSum += torch::nn::functional::cross_entropy(logits, batch.target).item<double>() * n;
      const int64_t k = std::min<int64_t>(5, logits.size(1));
      auto topk = std::get<1>(logits.topk(k, 1));
      auto hits = topk.eq(batch.target.unsqueeze(1));
      top1 += hits.select(1, 0).sum().item<double>();
      top5 += hits.any(1).sum().item<double>();
      count += n;
    }
  }
  auto sums = torch::tensor({lossSum, top1, top5, count}, torch::kDouble);
  comm.allReduce(sums).wait();
  auto s = sums.accessor<double, 1>();
  model.train(wasTraining);
  const double total = std::max(1.0, s[3]);
  std::map<std::string, double> m;
  m["eval_loss"] = s[0] / total;
  if (mlm) {
    m["mlm_accuracy"] = s[1] / total;
    m["perplexity"] = std::exp(std::min(50.0, s[0] / total));
  } else {
    m["accuracy"] = s[1] / total;
    m["top5"] = s[2] / total;
  }
  return m;
}

}  // namespace gradzip::trainer
