// Tests of util/Yaml.h: every kind of bad input names file, line and key path.
#include "util/Yaml.h"

#include <gtest/gtest.h>

using gradzip::ConfigError;
using gradzip::YamlReader;

namespace {

// Runs `f` and returns the ConfigError message it must throw.
template <class F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

const char* kDoc =
    "run:\n"            // 1
    "  name: demo\n"    // 2
    "compress:\n"       // 3
    "  name: thc\n"     // 4
    "  thc:\n"          // 5
    "    bits: four\n"  // 6
    "    p: 0.03125\n"  // 7
    "  colective: ps\n";  // 8

}  // namespace

TEST(YamlReader, WrongTypeNamesFileLineAndKeyPath) {
  auto root = YamlReader::loadString(kDoc, "configs/x.yaml");
  auto c = root.child("compress");
  auto thc = c.child("thc");
  EXPECT_EQ(errorOf([&] { thc.getInt("bits", 4, 1, 8); }),
            "configs/x.yaml:6: compress.thc.bits: expected integer in [1, 8], got \"four\"");
}

TEST(YamlReader, OutOfRangeNamesValueAndRange) {
  auto root = YamlReader::loadString("bits: 12\n", "f.yaml");
  EXPECT_EQ(errorOf([&] { root.getInt("bits", 4, 1, 8); }), "f.yaml:1: bits: expected integer in [1, 8], got 12");
  auto r2 = YamlReader::loadString("lr: -1\n", "f.yaml");
  EXPECT_EQ(errorOf([&] { r2.getDouble("lr", 0.1, 0.0, 10.0); }),
            "f.yaml:1: lr: expected number in [0, 10], got -1");
}

TEST(YamlReader, UnknownKeyIsReportedWithItsLine) {
  auto root = YamlReader::loadString(kDoc, "configs/x.yaml");
  auto c = root.child("compress");
  c.getString("name", "fp16");
  c.child("thc");
  auto msg = errorOf([&] { c.finish(); });
  EXPECT_NE(msg.find("configs/x.yaml:8: compress.colective: unknown key"), std::string::npos) << msg;
}

TEST(YamlReader, MissingRequiredKey) {
  auto root = YamlReader::loadString("model: {}\n", "m.yaml");
  auto m = root.child("model");
  auto msg = errorOf([&] { m.requireString("name"); });
  EXPECT_NE(msg.find("m.yaml:1: model.name: missing required key"), std::string::npos) << msg;
}

TEST(YamlReader, MalformedYamlNamesLine) {
  auto msg = errorOf([] { YamlReader::loadString("a: 1\nb: [1, 2\nc: 3\n", "bad.yaml"); });
  EXPECT_EQ(msg.rfind("bad.yaml:", 0), 0u) << msg;
  EXPECT_NE(msg.find("malformed YAML"), std::string::npos) << msg;
}

TEST(YamlReader, EnumListsChoices) {
  auto root = YamlReader::loadString("collective: rnig\n", "e.yaml");
  EXPECT_EQ(errorOf([&] { root.getEnum("collective", "ring", {"ring", "tree", "ps"}); }),
            "e.yaml:1: collective: expected one of [ring, tree, ps], got \"rnig\"");
}

TEST(YamlReader, MappingExpectedWhereScalarGiven) {
  auto root = YamlReader::loadString("data: fashion\n", "d.yaml");
  EXPECT_EQ(errorOf([&] { root.child("data"); }), "d.yaml:1: data: expected a mapping, got \"fashion\"");
}

TEST(YamlReader, ListsAndDefaults) {
  auto root = YamlReader::loadString("targets: [0.5, 0.8]\nflag: yes\n", "l.yaml");
  EXPECT_EQ(root.getDoubleList("targets", {}), (std::vector<double>{0.5, 0.8}));
  EXPECT_TRUE(root.getBool("flag", false));
  EXPECT_EQ(root.getInt("absent", 7), 7);
  EXPECT_NO_THROW(root.finish());
  auto bad = YamlReader::loadString("targets: [0.5, x]\n", "l.yaml");
  EXPECT_EQ(errorOf([&] { bad.getDoubleList("targets", {}); }),
            "l.yaml:1: targets: element 1: expected numbers, got \"x\"");
}

TEST(YamlReader, ListOfMappingsCarriesIndexInPath) {
  auto root = YamlReader::loadString("arms:\n  - name: a\n  - name: b\n    bogus: 1\n", "s.yaml");
  auto arms = root.childList("arms");
  ASSERT_EQ(arms.size(), 2u);
  arms[1].getString("name", "");
  auto msg = errorOf([&] { arms[1].finish(); });
  EXPECT_NE(msg.find("s.yaml:4: arms[1].bogus: unknown key"), std::string::npos) << msg;
}

TEST(YamlReader, MissingFileIsAClearError) {
  EXPECT_EQ(errorOf([] { YamlReader::loadFile("/nonexistent/gradzip.yaml"); }),
            "/nonexistent/gradzip.yaml: cannot open config file");
}

TEST(YamlReader, DuplicateKeyNamesBothLines) {
  // yaml-cpp keeps the first of two equal keys; the strict schema refuses.
  auto msg = errorOf([] {
    YamlReader::loadString("data:\n  batch_size: 64\n  dataset: fashion_mnist\n  batch_size: 128\n", "dup.yaml");
  });
  EXPECT_EQ(msg, "dup.yaml:4: data.batch_size: duplicate key (first given on line 2); keep one of them");
  // Equal keys in different mappings, and in list elements, are fine; a
  // repeat inside a list element is not.
  EXPECT_NO_THROW(YamlReader::loadString("a: {x: 1}\nb: {x: 2}\n", "ok.yaml"));
  msg = errorOf([] { YamlReader::loadString("arms:\n  - {name: a, name: b}\n", "s.yaml"); });
  EXPECT_NE(msg.find("s.yaml:2: arms[0].name: duplicate key"), std::string::npos) << msg;
}

TEST(YamlReader, CommandLineValuesAreNamedByTheirAssignment) {
  // What TrainConfig::load builds for `--set train.epochs=abc --set model.extra.depth=3`:
  // the values have no place in the file, so errors name the assignment.
  auto root = YamlReader::loadString("train:\n  epochs: 1\nmodel:\n  name: mlp\n", "c.yaml");
  YAML::Node node = YAML::Load("train:\n  epochs: 1\nmodel:\n  name: mlp\n");
  node["train"]["epochs"] = YAML::Load("abc");
  node["model"]["extra"] = YAML::Node(YAML::NodeType::Map);
  node["model"]["extra"]["depth"] = YAML::Load("3");
  YamlReader r(node, "c.yaml", "");
  r.setOverrides({{"train.epochs", "train.epochs=abc"}, {"model.extra.depth", "model.extra.depth=3"}});
  auto train = r.child("train");
  EXPECT_EQ(errorOf([&] { train.getDouble("epochs", 1, 0, 10); }),
            "--set train.epochs=abc: train.epochs: expected number in [0, 10], got \"abc\"");
  auto model = r.child("model");
  model.getString("name", "");
  EXPECT_EQ(errorOf([&] { model.finish(); }).rfind("--set model.extra.depth=3: model.extra: unknown key", 0), 0u);
  // A key the file gives keeps its file line.
  EXPECT_EQ(errorOf([&] { model.getEnum("name", "", {"resnet20"}); }),
            "c.yaml:4: model.name: expected one of [resnet20], got \"mlp\"");
}

TEST(YamlReader, RecordsEveryKeyAskedForWithTypeDefaultAndRange) {
  auto r = YamlReader::loadString("a:\n  n: 3\nl:\n  - {x: 1}\n  - {x: 2}\n");
  auto log = std::make_shared<std::vector<gradzip::YamlKeyRecord>>();
  r.recordInto(log);
  auto a = r.child("a");
  EXPECT_EQ(a.getInt("n", 4, 1, 16), 3);  // parsing is unchanged
  a.getDouble("w", 0.85, 0.0, 1.0);
  a.getEnum("e", "p", {"p", "q"});
  a.getBool("b", true);
  for (auto& item : r.childList("l")) item.requireInt("x", 0);
  r.getString("s", "");
  ASSERT_EQ(log->size(), 7u);
  auto is = [&](size_t i, const char* path, const char* type, const char* def, const char* range) {
    const auto& k = (*log)[i];
    EXPECT_EQ(k.path, path);
    EXPECT_EQ(k.type, type);
    EXPECT_EQ(k.def, def);
    EXPECT_EQ(k.range, range);
  };
  is(0, "a.n", "integer", "4", "[1, 16]");
  is(1, "a.w", "number", "0.85", "[0, 1]");
  is(2, "a.e", "enum", "p", "p, q");
  is(3, "a.b", "boolean", "true", "");
  is(4, "l[].x", "integer", "required", ">= 0");  // one schema line per list element
  is(5, "l[].x", "integer", "required", ">= 0");
  is(6, "s", "string", "\"\"", "");
}
