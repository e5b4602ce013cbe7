// Typed options of every model (STYLE.md §5): the registry name, the image
// geometry (input channels, classes) and one sub-mapping per family (`resnet`,
// `bert`, `mlp`). Parsed once from YAML, validated before a model is built, and
// written back as the effective config. A sub-mapping given for a family other
// than the named model's is an error, so a typo like `name: vgg16` with
// `resnet: {...}` is caught rather than silently ignored. Example:
//   model:
//     name: resnet20
//     in_channels: 3
//     num_classes: 10
//     resnet: {shortcut: zeropad}
#pragma once

#include "util/Yaml.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::models {

enum class ModelFamily { kResNet, kVgg, kBert, kMlp };

// The family of a registry name ("resnet20" -> kResNet); UserError if unknown.
ModelFamily familyOf(const std::string& name);
// True for the CIFAR ResNets of He et al. §4.2 (resnet20, resnet32, resnet56, resnet110).
bool isCifarResNet(const std::string& name);

struct ResNetOptions {
  // "projection": 1x1 conv (stride s) + BN where the shape changes (He et al.
  // option B, torchvision). "zeropad": identity with stride-s subsampling and
  // zero channels appended (He et al. option A, their CIFAR models); CIFAR ResNets only.
  std::string shortcut = "projection";
  // resnet18/50 only. "imagenet": torchvision's 7x7/2 conv + 3x3/2 max-pool.
  // "cifar": one 3x3/1 conv and no pool, the usual layout for 32x32 inputs.
  std::string stem = "imagenet";

  static ResNetOptions fromYaml(YamlReader& r, bool cifarResNet);
  void toYaml(YAML::Node& node, bool cifarResNet) const;
};

// Defaults follow the compact "BERT-mini" shape (4 layers, hidden 256, 4 heads;
// Turc et al. 2019), which trains on a CPU; BERT-base is 12/768/12/3072.
// vocab_size must equal the tokenizer's vocabulary size.
struct BertOptions {
  int64_t vocabSize = 8192;
  int64_t maxLen = 128;  // positions with a learned embedding; longer inputs are rejected
  int64_t layers = 4;
  int64_t hidden = 256;
  int64_t heads = 4;  // must divide hidden
  int64_t intermediate = 1024;
  double dropout = 0.1;  // embeddings, attention probabilities, both residual branches

  static BertOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& node) const;
};

struct MlpOptions {
  int64_t inputSize = 784;  // features per sample after flattening (28x28x1 by default)
  std::vector<int64_t> hidden = {128};  // widths of the ReLU hidden layers; may be empty

  static MlpOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& node) const;
};

struct ModelOptions {
  std::string name;  // a registry name: resnet18, resnet20, ..., vgg11, bert, mlp
  int64_t inChannels = 3;  // resnet*, vgg*
  int64_t numClasses = 10;  // resnet*, vgg*, mlp
  ResNetOptions resnet;
  BertOptions bert;
  MlpOptions mlp;

  // Reads the model mapping (e.g. r.child("model")) and finish()es it. Errors
  // (unknown name, bad value, hidden % heads != 0, a section for another family)
  // are ConfigErrors naming file:line:key.
  static ModelOptions fromYaml(YamlReader& r);
  // Writes the effective values relevant to `name` (a fromYaml round trip).
  void toYaml(YAML::Node& node) const;
  // Checks values set in code; throws ConfigError "model.<key>: <problem>".
  void validate() const;

  ModelFamily family() const { return familyOf(name); }
};

}  // namespace gradzip::models
