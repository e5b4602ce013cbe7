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
