// Tests data/Factory.h end to end on generated files: each dataset kind yields
// train/test Datasets whose batches have the documented shapes and types.
#include "data/Factory.h"

#include "tests/data/DataTestFiles.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>

#include <filesystem>

namespace gradzip::data {
namespace {

using namespace gradzip::data::testing;

DataOptions parse(const std::string& yaml) {
  YamlReader r = YamlReader::loadString(yaml, "test.yaml");
  return DataOptions::fromYaml(r);
}

TEST(Factory, FashionMnistLayoutGivesNormalisedImageBatches) {
  gradzip::testing::TempDir tmp;
  for (auto [prefix, n] : {std::pair{"train", 12}, {"t10k", 4}}) {
    std::vector<uint8_t> px(size_t(n) * 28 * 28, 255), labels;
    for (int i = 0; i < n; ++i) labels.push_back(uint8_t(i % 10));
    writeGz(tmp.path() + "/" + prefix + "-images-idx3-ubyte.gz", idxBytes({uint32_t(n), 28, 28}, px));
    writeGz(tmp.path() + "/" + prefix + "-labels-idx1-ubyte.gz", idxBytes({uint32_t(n)}, labels));
  }
  Datasets d = makeDatasets(parse("path: " + tmp.path() + "\n"));
  ASSERT_TRUE(d.test);
  EXPECT_EQ(d.train->size(), 12);
  EXPECT_EQ(d.test->size(), 4);
  EXPECT_EQ(d.train->info().numClasses, 10);
  Rng rng(0);
  Batch b = d.train->getBatch({3, 0}, rng);
  ASSERT_EQ(b.input.sizes(), (std::vector<int64_t>{2, 1, 28, 28}));
  EXPECT_TRUE(at::equal(b.target, at::tensor({3, 0}, at::kLong)));
  // White pixels normalise to (1 - 0.2860) / 0.3530.
  EXPECT_NEAR(b.input.min().item<float>(), (1 - 0.2860) / 0.3530, 1e-5);
}

TEST(Factory, ImageFolderWithTrainAndValSplits) {
  gradzip::testing::TempDir tmp;
  for (const char* split : {"train", "val"})
    for (const char* cls : {"cat", "dog"}) {
      std::string dir = tmp.path() + "/" + split + "/" + cls;
      std::filesystem::create_directories(dir);
      cv::imwrite(dir + "/0.png", cv::Mat(10, 12, CV_8UC3, cv::Scalar(10, 20, 30)));
    }
  Datasets d = makeDatasets(parse("dataset: image_folder\npath: " + tmp.path() + "\nimage_size: [8, 8]\n"));
  ASSERT_TRUE(d.test);
  EXPECT_EQ(d.train->size(), 2);
  DatasetInfo info = d.test->info();
  EXPECT_EQ(info.numClasses, 2);
  EXPECT_EQ(info.height, 8);
  EXPECT_EQ(info.channels, 3);
}

TEST(Factory, TextMlmTrainsTokenizerAndPacksBothSplits) {
  gradzip::testing::TempDir tmp;
  std::filesystem::create_directories(tmp.path() + "/docs");
  Rng rng(8);
  const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"};
  for (int f = 0; f < 4; ++f) {
    std::string text;
    for (int l = 0; l < 200; ++l) {
      for (int w = 0; w < 8; ++w) text += std::string(w ? " " : "") + words[rng.uniformInt(8)];
      text += "\n";
    }
    writeGz(fmt::format("{}/docs/{}.rst.gz", tmp.path(), f), text);
  }
  DataOptions o = parse("dataset: text_mlm\npath: " + tmp.path() + "/docs\ntext: {vocab_size: 60, seq_len: 32, "
                        "cache_dir: " + tmp.path() + "/cache}\nworkers: 2\n");
  Datasets d = makeDatasets(o);
  ASSERT_TRUE(d.test);
  DatasetInfo info = d.train->info();
  EXPECT_EQ(info.kind, "mlm");
  EXPECT_EQ(info.seqLen, 32);
  EXPECT_LE(info.vocabSize, 60);
  EXPECT_GT(d.train->size(), 3 * d.test->size());  // 3 training files, 1 held out
  Batch b = d.test->getBatch({0}, rng);
  ASSERT_EQ(b.input.sizes(), (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(b.input.scalar_type(), at::kLong);
  EXPECT_EQ(b.input[0][0].item<int64_t>(), 2);  // [CLS]
}

TEST(Factory, UnknownDatasetListsKnownOnes) {
  DataOptions o;
  o.dataset = "mnist";
  EXPECT_THAT([&] { makeDatasets(o); }, ::testing::ThrowsMessage<UserError>(::testing::HasSubstr(
                                            "unknown dataset 'mnist' (known: fashion_mnist, cifar10")));
}

}  // namespace
}  // namespace gradzip::data
