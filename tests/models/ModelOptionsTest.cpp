// Tests of models/ModelOptions.{h,cpp}: YAML parsing with defaults, round trips
// through toYaml, and errors that name file:line:key.
#include "models/ModelOptions.h"

#include "util/Error.h"

#include <gtest/gtest.h>

namespace gradzip::models {
namespace {

ModelOptions parse(const std::string& yaml) {
  auto r = YamlReader::loadString(yaml, "m.yaml");
  return ModelOptions::fromYaml(r);
}

// Expects fromYaml to throw a ConfigError whose message starts with `prefix`
// ("file:line: key:") and contains `needle`.
void expectError(const std::string& yaml, const std::string& prefix, const std::string& needle = "") {
  try {
    parse(yaml);
    ADD_FAILURE() << "expected ConfigError for:\n" << yaml;
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(prefix, 0), 0u) << "message: " << msg << "\nexpected prefix: " << prefix;
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg << "\nexpected: " << needle;
  }
}

TEST(ModelOptionsTest, ParsesWithDefaults) {
  auto o = parse("name: resnet20\nin_channels: 1\nresnet: {shortcut: zeropad}\n");
  EXPECT_EQ(o.name, "resnet20");
  EXPECT_EQ(o.inChannels, 1);
  EXPECT_EQ(o.numClasses, 10);
  EXPECT_EQ(o.resnet.shortcut, "zeropad");
  EXPECT_EQ(o.family(), ModelFamily::kResNet);

  auto b = parse("name: bert\nbert:\n  vocab_size: 1000\n  hidden: 64\n  heads: 8\n");
  EXPECT_EQ(b.bert.vocabSize, 1000);
  EXPECT_EQ(b.bert.hidden, 64);
  EXPECT_EQ(b.bert.heads, 8);
  EXPECT_EQ(b.bert.layers, BertOptions{}.layers);
  EXPECT_DOUBLE_EQ(b.bert.dropout, 0.1);

  auto m = parse("name: mlp\nnum_classes: 3\nmlp: {input_size: 12, hidden: [5, 4]}\n");
  EXPECT_EQ(m.mlp.inputSize, 12);
  EXPECT_EQ(m.mlp.hidden, (std::vector<int64_t>{5, 4}));
}

TEST(ModelOptionsTest, RoundTripsThroughToYaml) {
  for (const std::string yaml :
       {"name: resnet18\nin_channels: 1\nnum_classes: 100\nresnet: {shortcut: projection, stem: cifar}\n",
        "name: resnet56\nresnet: {shortcut: zeropad}\n", "name: vgg19\nnum_classes: 7\n",
        "name: bert\nbert: {vocab_size: 300, max_len: 64, layers: 3, hidden: 48, heads: 6, intermediate: 96, "
        "dropout: 0.25}\n",
        "name: mlp\nmlp: {input_size: 20, hidden: []}\n"}) {
    const auto a = parse(yaml);
    YAML::Node n;
    a.toYaml(n);
    YAML::Emitter out;
    out << n;
    const auto b = parse(out.c_str());
    YAML::Node n2;
    b.toYaml(n2);
    YAML::Emitter out2;
    out2 << n2;
    EXPECT_EQ(std::string(out.c_str()), std::string(out2.c_str())) << yaml;
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.inChannels, a.inChannels);
    EXPECT_EQ(b.numClasses, a.numClasses);
    EXPECT_EQ(b.resnet.stem, a.resnet.stem);
    EXPECT_EQ(b.bert.intermediate, a.bert.intermediate);
    EXPECT_DOUBLE_EQ(b.bert.dropout, a.bert.dropout);
    EXPECT_EQ(b.mlp.hidden, a.mlp.hidden);
  }
}

TEST(ModelOptionsTest, BadValuesNameFileLineAndKey) {
  expectError("name: resnet21\n", "m.yaml:1: name:", "resnet18");
  expectError("in_channels: 3\n", "m.yaml:", "name: missing required key");
  expectError("name: vgg11\nin_channels: 0\n", "m.yaml:2: in_channels:", "integer >= 1");
  expectError("name: vgg11\nnum_classes: ten\n", "m.yaml:2: num_classes:", "\"ten\"");
  expectError("name: resnet20\nresnet:\n  shortcut: zero\n", "m.yaml:3: resnet.shortcut:", "projection, zeropad");
  expectError("name: resnet18\nresnet:\n  shortcut: zeropad\n", "m.yaml:3: resnet.shortcut:", "CIFAR ResNets");
  expectError("name: resnet20\nresnet:\n  stem: cifar\n", "m.yaml:3: resnet.stem:", "3x3 stem");
  expectError("name: bert\nbert:\n  heads: 3\n  hidden: 100\n", "m.yaml:4: bert.hidden:",
              "100 is not divisible by bert.heads = 3");
  expectError("name: bert\nbert:\n  dropout: 1.0\n", "m.yaml:3: bert.dropout:", "[0, 1)");
  expectError("name: bert\nbert:\n  hiden: 64\n", "m.yaml:3: bert.hiden:", "unknown key");
  expectError("name: bert\nin_channels: 3\n", "m.yaml:2: in_channels:", "not used by model 'bert'");
  expectError("name: vgg16\nresnet: {shortcut: zeropad}\n", "m.yaml:2: resnet:", "only by resnet*");
  expectError("name: mlp\nmlp:\n  hidden: [4, 0]\n", "m.yaml:3: mlp.hidden:", "element 1");
  expectError("name: mlp\nmlp:\n  hidden: 64\n", "m.yaml:3: mlp.hidden:", "list");
}

TEST(ModelOptionsTest, NestedPathsInErrors) {
  auto root = YamlReader::loadString("model:\n  name: bert\n  bert:\n    heads: 0\n", "run.yaml");
  auto r = root.child("model");
  try {
    ModelOptions::fromYaml(r);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("run.yaml:4: model.bert.heads:", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace gradzip::models
