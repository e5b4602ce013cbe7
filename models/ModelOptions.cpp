// Implements models/ModelOptions.h: YAML parsing, validation and write-back of
// the model options. One table of checks (findProblem) serves both code-built
// options (validate) and YAML (fromYaml, which points the error at file:line).
#include "models/ModelOptions.h"

#include "models/Registry.h"
#include "util/Error.h"

#include <algorithm>
#include <optional>

namespace gradzip::models {
namespace {

const std::vector<std::string> kShortcuts = {"projection", "zeropad"};
const std::vector<std::string> kStems = {"imagenet", "cifar"};

// A bad value: `section` is "" for top-level keys, else "resnet", "bert" or "mlp".
struct Problem {
  std::string section, key, message;
};

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::optional<Problem> findProblem(const ModelOptions& o) {
  const auto names = modelNames();
  if (!contains(names, o.name))
    return Problem{"", "name", fmt::format("unknown model '{}' (known: {})", o.name, fmt::join(names, ", "))};
  const ModelFamily f = o.family();
  if ((f == ModelFamily::kResNet || f == ModelFamily::kVgg) && o.inChannels < 1)
    return Problem{"", "in_channels", fmt::format("expected integer >= 1, got {}", o.inChannels)};
  if (f != ModelFamily::kBert && o.numClasses < 1)
    return Problem{"", "num_classes", fmt::format("expected integer >= 1, got {}", o.numClasses)};
  if (f == ModelFamily::kResNet) {
    const auto& r = o.resnet;
    if (!contains(kShortcuts, r.shortcut))
      return Problem{"resnet", "shortcut",
                     fmt::format("expected one of [projection, zeropad], got \"{}\"", r.shortcut)};
    if (r.shortcut == "zeropad" && !isCifarResNet(o.name))
      return Problem{"resnet", "shortcut",
                     fmt::format("zeropad (He et al. option A) is for the CIFAR ResNets (resnet20, resnet32, "
                                 "resnet56, resnet110), not {}",
                                 o.name)};
    if (!contains(kStems, r.stem))
      return Problem{"resnet", "stem", fmt::format("expected one of [imagenet, cifar], got \"{}\"", r.stem)};
  }
  if (f == ModelFamily::kBert) {
    const auto& b = o.bert;
    const std::pair<const char*, int64_t> positive[] = {{"vocab_size", b.vocabSize}, {"max_len", b.maxLen},
                                                        {"layers", b.layers},         {"hidden", b.hidden},
                                                        {"heads", b.heads},           {"intermediate", b.intermediate}};
    for (const auto& [key, v] : positive)
      if (v < 1) return Problem{"bert", key, fmt::format("expected integer >= 1, got {}", v)};
    if (b.hidden % b.heads != 0)
      return Problem{"bert", "hidden",
                     fmt::format("{} is not divisible by bert.heads = {} (each head gets hidden / heads "
                                 "dimensions)",
                                 b.hidden, b.heads)};
    if (!(b.dropout >= 0.0 && b.dropout < 1.0))
      return Problem{"bert", "dropout", fmt::format("expected a probability in [0, 1), got {}", b.dropout)};
  }
  if (f == ModelFamily::kMlp) {
    if (o.mlp.inputSize < 1)
      return Problem{"mlp", "input_size", fmt::format("expected integer >= 1, got {}", o.mlp.inputSize)};
    for (size_t i = 0; i < o.mlp.hidden.size(); ++i)
      if (o.mlp.hidden[i] < 1)
        return Problem{"mlp", "hidden", fmt::format("element {}: expected a width >= 1, got {}", i, o.mlp.hidden[i])};
  }
  return std::nullopt;
}

}  // namespace

ModelFamily familyOf(const std::string& name) {
  if (name.rfind("resnet", 0) == 0) return ModelFamily::kResNet;
  if (name.rfind("vgg", 0) == 0) return ModelFamily::kVgg;
  if (name == "bert") return ModelFamily::kBert;
  if (name == "mlp") return ModelFamily::kMlp;
  throw ConfigError(fmt::format("unknown model '{}' (known: {})", name, fmt::join(modelNames(), ", ")));
}

bool isCifarResNet(const std::string& name) {
  return name == "resnet20" || name == "resnet32" || name == "resnet56" || name == "resnet110";
}

ResNetOptions ResNetOptions::fromYaml(YamlReader& r, bool cifarResNet) {
  ResNetOptions o;
  o.shortcut = r.getEnum("shortcut", o.shortcut, kShortcuts);
  if (cifarResNet && r.has("stem"))
    r.fail("stem", "the CIFAR ResNets (resnet20/32/56/110) always use a 3x3 stem; stem is for resnet18/resnet50");
  o.stem = r.getEnum("stem", o.stem, kStems);
  r.finish();
  return o;
}

void ResNetOptions::toYaml(YAML::Node& node, bool cifarResNet) const {
  node["shortcut"] = shortcut;
  if (!cifarResNet) node["stem"] = stem;
}

BertOptions BertOptions::fromYaml(YamlReader& r) {
  BertOptions o;
  o.vocabSize = r.getInt("vocab_size", o.vocabSize, 1);
  o.maxLen = r.getInt("max_len", o.maxLen, 1);
  o.layers = r.getInt("layers", o.layers, 1);
  o.hidden = r.getInt("hidden", o.hidden, 1);
  o.heads = r.getInt("heads", o.heads, 1);
  o.intermediate = r.getInt("intermediate", o.intermediate, 1);
  o.dropout = r.getDouble("dropout", o.dropout, 0.0, 1.0);
  r.finish();
  return o;
}

void BertOptions::toYaml(YAML::Node& node) const {
  node["vocab_size"] = vocabSize;
  node["max_len"] = maxLen;
  node["layers"] = layers;
  node["hidden"] = hidden;
  node["heads"] = heads;
  node["intermediate"] = intermediate;
  node["dropout"] = dropout;
}

MlpOptions MlpOptions::fromYaml(YamlReader& r) {
  MlpOptions o;
  o.inputSize = r.getInt("input_size", o.inputSize, 1);
  o.hidden = r.getIntList("hidden", o.hidden);
  r.finish();
  return o;
}

void MlpOptions::toYaml(YAML::Node& node) const {
  node["input_size"] = inputSize;
  YAML::Node h(YAML::NodeType::Sequence);
  for (int64_t w : hidden) h.push_back(w);
  h.SetStyle(YAML::EmitterStyle::Flow);
  node["hidden"] = h;
}

ModelOptions ModelOptions::fromYaml(YamlReader& r) {
  ModelOptions o;
  const auto names = modelNames();
  if (!r.has("name")) r.fail("name", fmt::format("missing required key (one of [{}])", fmt::join(names, ", ")));
  o.name = r.getEnum("name", "", names);
  const ModelFamily f = o.family();
  const bool image = f == ModelFamily::kResNet || f == ModelFamily::kVgg;

  // Keys that mean nothing for this model are errors, not silently ignored.
  auto onlyFor = [&](const char* key, bool used, const char* users) {
    if (!used && r.has(key)) r.fail(key, fmt::format("not used by model '{}' (only by {})", o.name, users));
  };
  onlyFor("in_channels", image, "resnet* and vgg*; the mlp takes mlp.input_size");
  onlyFor("num_classes", f != ModelFamily::kBert, "resnet*, vgg* and mlp; bert predicts bert.vocab_size tokens");
  onlyFor("resnet", f == ModelFamily::kResNet, "resnet*");
  onlyFor("bert", f == ModelFamily::kBert, "bert");
  onlyFor("mlp", f == ModelFamily::kMlp, "mlp");

  if (image) o.inChannels = r.getInt("in_channels", o.inChannels, 1);
  if (f != ModelFamily::kBert) o.numClasses = r.getInt("num_classes", o.numClasses, 1);
  YamlReader resnet = r.child("resnet"), bert = r.child("bert"), mlp = r.child("mlp");
  if (f == ModelFamily::kResNet) o.resnet = ResNetOptions::fromYaml(resnet, isCifarResNet(o.name));
  if (f == ModelFamily::kBert) o.bert = BertOptions::fromYaml(bert);
  if (f == ModelFamily::kMlp) o.mlp = MlpOptions::fromYaml(mlp);
  r.finish();

  if (auto p = findProblem(o)) {
    if (p->section == "resnet") resnet.fail(p->key, p->message);
    if (p->section == "bert") bert.fail(p->key, p->message);
    if (p->section == "mlp") mlp.fail(p->key, p->message);
    r.fail(p->key, p->message);
  }
  return o;
}

void ModelOptions::toYaml(YAML::Node& node) const {
  node["name"] = name;
  const ModelFamily f = family();
  if (f == ModelFamily::kResNet || f == ModelFamily::kVgg) node["in_channels"] = inChannels;
  if (f != ModelFamily::kBert) node["num_classes"] = numClasses;
  if (f == ModelFamily::kResNet) {
    YAML::Node n;
    resnet.toYaml(n, isCifarResNet(name));
    node["resnet"] = n;
  }
  if (f == ModelFamily::kBert) {
    YAML::Node n;
    bert.toYaml(n);
    node["bert"] = n;
  }
  if (f == ModelFamily::kMlp) {
    YAML::Node n;
    mlp.toYaml(n);
    node["mlp"] = n;
  }
}

void ModelOptions::validate() const {
  if (auto p = findProblem(*this))
    throw ConfigError(fmt::format("model.{}{}: {}", p->section.empty() ? "" : p->section + ".", p->key, p->message));
}

}  // namespace gradzip::models
