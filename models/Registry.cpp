// Implements models/Registry.h: the table of known models.
#include "models/Registry.h"

#include "models/Bert.h"
#include "models/Mlp.h"
#include "models/ResNet.h"
#include "models/Vgg.h"

#include <functional>
#include <map>

namespace gradzip::models {
namespace {

using Maker = std::function<std::shared_ptr<Model>(const ModelOptions&)>;

const std::map<std::string, Maker>& registry() {
  static const std::map<std::string, Maker> table = [] {
    std::map<std::string, Maker> t;
    for (const char* n : {"resnet18", "resnet50", "resnet20", "resnet32", "resnet56", "resnet110"})
      t[n] = [](const ModelOptions& o) { return std::make_shared<ResNet>(o); };
    for (const char* n : {"vgg11", "vgg16", "vgg19"})
      t[n] = [](const ModelOptions& o) { return std::make_shared<Vgg>(o); };
    t["bert"] = [](const ModelOptions& o) { return std::make_shared<Bert>(o); };
    t["mlp"] = [](const ModelOptions& o) { return std::make_shared<Mlp>(o); };
    return t;
  }();
  return table;
}

}  // namespace

std::vector<std::string> modelNames() {
  std::vector<std::string> out;
  for (const auto& [name, make] : registry()) out.push_back(name);
  return out;
}

std::shared_ptr<Model> makeModel(const ModelOptions& options) {
  options.validate();  // also rejects unknown names, listing the known ones
  auto model = registry().at(options.name)(options);
  model->train();
  return model;
}

}  // namespace gradzip::models
