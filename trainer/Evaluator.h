// Evaluation of a model on a held-out split, sharded over ranks and reduced
// with one all-reduce: top-1 and top-5 accuracy and loss for classification;
// masked-token loss, accuracy and perplexity for masked-LM models. The caller
// pauses the training clock around it.
#pragma once

#include "comm/Communicator.h"
#include "data/DataLoader.h"
#include "models/Model.h"

#include <map>
#include <string>

namespace gradzip::trainer {

// Metrics by name: classification {accuracy, top5, eval_loss};
// masked-LM {eval_loss, mlm_accuracy, perplexity}.
std::map<std::string, double> evaluate(models::Model& model, data::DataLoader& loader, comm::Communicator& comm,
                                       int64_t maxBatches);

// The training loss of a batch for the model's kind.
at::Tensor lossOf(models::Model& model, const at::Tensor& logits, const at::Tensor& target);

// The metric that decides early stopping and targets: accuracy for
// classification (higher is better), mlm_accuracy for masked-LM.
std::string primaryMetric(models::ModelKind kind);

}  // namespace gradzip::trainer
