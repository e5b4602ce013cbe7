// The interface every gradzip model implements: a torch::nn::Module whose
// parameters are registered in forward order (the trainer's GradSync buckets
// gradients in reverse registration order, so the first bucket to fill during
// backward is the last one registered; note that named_parameters() lists a
// module's own parameters before its children's, so keep parameters in child
// modules registered in forward order), plus a forward on a single tensor and a
// kind() telling the trainer which loss and metric apply. Models are built by
// name through models/Registry.h from a ModelOptions.
//
// Adding a model: write models/<Name>.{h,cpp} with a class deriving from Model,
// add its options (if any) to ModelOptions, register it in models/Registry.cpp,
// add tests/models/<Name>Test.cpp (parameter count, shapes, gradients) and a row
// to models/README.md.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>

namespace gradzip::models {

// What forward() returns and hence which loss the trainer uses.
enum class ModelKind {
  kClassification,  // images [B, C, H, W] (float) -> logits [B, classes]; cross-entropy, accuracy
  kMaskedLm,        // token ids [B, T] (int64) -> logits [B, T, vocab]; masked-LM cross-entropy
};

// "classification" or "masked_lm".
const char* toString(ModelKind kind);

class Model : public torch::nn::Module {
 public:
  // `name` is the registry name ("resnet20"); torch::nn::Module::name() returns it.
  explicit Model(std::string name) : torch::nn::Module(std::move(name)) {}

  // The logits for a batch; shapes as in ModelKind. Honours is_training()
  // (BatchNorm statistics, dropout). Throws UserError on an input of the wrong
  // rank, channel count or sequence length, naming what was expected.
  virtual at::Tensor forward(const at::Tensor& input) = 0;

  // Masked-LM models: `attentionMask` is [B, T], nonzero/true for real tokens and
  // zero/false for padding; padded keys receive no attention. An undefined mask
  // means "no padding". The default (classification models) accepts only an
  // undefined mask and calls forward(input).
  virtual at::Tensor forwardMasked(const at::Tensor& input, const at::Tensor& attentionMask);

  virtual ModelKind kind() const = 0;
};

// Number of scalar parameters (not buffers) of `module`, each tensor counted once
// (a tied weight registered once is counted once).
int64_t parameterCount(const torch::nn::Module& module);

// "[2, 3, 32, 32]": a tensor's shape for error messages.
std::string shapeOf(const at::Tensor& t);

}  // namespace gradzip::models
