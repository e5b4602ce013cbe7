// Tests of models/Registry.{h,cpp}: the list of names, unknown-name errors,
// models built in training mode with the right kind.
#include "models/Registry.h"

#include "tests/models/ModelTesting.h"
#include "util/Error.h"

#include <gtest/gtest.h>

namespace gradzip::models {
namespace {

TEST(RegistryTest, KnownNames) {
  const std::vector<std::string> expected = {"bert",     "mlp",      "resnet110", "resnet18", "resnet20", "resnet32",
                                             "resnet50", "resnet56", "vgg11",     "vgg16",    "vgg19"};
  EXPECT_EQ(modelNames(), expected);
}

TEST(RegistryTest, UnknownNameListsKnownOnes) {
  try {
    makeModel(testing::imageOptions("resnet21", 3, 10));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model.name"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'resnet21'"), std::string::npos) << msg;
    for (const auto& n : modelNames()) EXPECT_NE(msg.find(n), std::string::npos) << n << " missing from: " << msg;
  }
}

TEST(RegistryTest, BuildsInTrainingModeWithKind) {
  auto m = makeModel(testing::imageOptions("resnet20", 1, 10));
  EXPECT_TRUE(m->is_training());
  EXPECT_EQ(m->name(), "resnet20");
  EXPECT_EQ(m->kind(), ModelKind::kClassification);
  EXPECT_STREQ(toString(ModelKind::kMaskedLm), "masked_lm");
  ModelOptions b;
  b.name = "bert";
  b.bert.layers = 1;
  b.bert.hidden = 16;
  b.bert.heads = 2;
  b.bert.intermediate = 32;
  b.bert.vocabSize = 100;
  EXPECT_EQ(makeModel(b)->kind(), ModelKind::kMaskedLm);
}

TEST(RegistryTest, InvalidOptionsInCodeNameTheKey) {
  ModelOptions b;
  b.name = "bert";
  b.bert.hidden = 10;
  b.bert.heads = 3;
  EXPECT_THROW(
      {
        try {
          makeModel(b);
        } catch (const ConfigError& e) {
          EXPECT_NE(std::string(e.what()).find("model.bert.hidden: 10 is not divisible by bert.heads = 3"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      ConfigError);
  auto r = testing::imageOptions("resnet18", 3, 10);
  r.resnet.shortcut = "zeropad";
  EXPECT_THROW(makeModel(r), ConfigError);
  auto c = testing::imageOptions("vgg11", 0, 10);
  EXPECT_THROW(makeModel(c), ConfigError);
}

}  // namespace
}  // namespace gradzip::models
