// Tests data/FashionMnist.h on generated MNIST-layout directories, and on the
// real Debian dataset when it is installed.
#include "data/FashionMnist.h"

#include "tests/data/DataTestFiles.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>

namespace gradzip::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace gradzip::data::testing;

// Writes prefix-{images,labels} for n images of rows x cols with the given labels.
void writeSplit(const std::string& dir, const std::string& prefix, int64_t n, int64_t rows, int64_t cols,
                std::vector<uint8_t> labels) {
  std::vector<uint8_t> px;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y < rows; ++y)
      for (int64_t x = 0; x < cols; ++x) px.push_back(pixel(i, y, x, 0));
  writeGz(dir + "/" + prefix + "-images-idx3-ubyte.gz", idxBytes({uint32_t(n), uint32_t(rows), uint32_t(cols)}, px));
  writeGz(dir + "/" + prefix + "-labels-idx1-ubyte.gz", idxBytes({uint32_t(labels.size())}, labels));
}

std::string errorOf(const std::string& dir, bool train) {
  try {
    loadFashionMnist(dir, train);
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(FashionMnist, ReadsGeneratedSplits) {
  gradzip::testing::TempDir dir;
  writeSplit(dir.path(), "train", 7, 4, 5, {0, 1, 2, 3, 9, 8, 7});
  writeSplit(dir.path(), "t10k", 3, 4, 5, {5, 5, 0});
  ImageData train = loadFashionMnist(dir.path(), true);
  ASSERT_EQ(train.images.sizes(), (std::vector<int64_t>{7, 4, 5, 1}));
  EXPECT_EQ(train.labels.scalar_type(), at::kLong);
  EXPECT_EQ(train.labels[4].item<int64_t>(), 9);
  EXPECT_EQ(train.images[6][3][2][0].item<uint8_t>(), pixel(6, 3, 2, 0));
  EXPECT_EQ(train.classNames.size(), 10u);
  ImageData test = loadFashionMnist(dir.path(), false);
  EXPECT_EQ(test.size(), 3);
  EXPECT_EQ(test.labels[2].item<int64_t>(), 0);
}

TEST(FashionMnist, LabelOutOfRangeNamesFileAndIndex) {
  gradzip::testing::TempDir dir;
  writeSplit(dir.path(), "train", 4, 2, 2, {0, 1, 12, 3});
  EXPECT_THAT(errorOf(dir.path(), true),
              AllOf(HasSubstr("train-labels-idx1-ubyte.gz"), HasSubstr("label 12 at index 2")));
}

TEST(FashionMnist, CountMismatchAndWrongRankAreWrongDimensions) {
  gradzip::testing::TempDir dir;
  writeSplit(dir.path(), "train", 4, 2, 2, {0, 1, 2});
  EXPECT_THAT(errorOf(dir.path(), true), AllOf(HasSubstr("wrong dimensions"), HasSubstr("4 images"),
                                                HasSubstr("3 labels")));
  // Labels file with two dimensions.
  writeGz(dir.path() + "/train-labels-idx1-ubyte.gz", idxBytes({2, 2}, {0, 1, 2, 3}));
  EXPECT_THAT(errorOf(dir.path(), true),
              AllOf(HasSubstr("train-labels-idx1-ubyte.gz"), HasSubstr("wrong dimensions [2, 2]")));
}

TEST(FashionMnist, MissingFileSaysWhereToGetIt) {
  gradzip::testing::TempDir dir;
  EXPECT_THAT(errorOf(dir.path(), false),
              AllOf(HasSubstr("t10k-images-idx3-ubyte.gz not found"), HasSubstr("dataset-fashion-mnist")));
}

TEST(FashionMnist, RealDebianDataset) {
  if (!std::filesystem::is_directory(kFashionMnistDefaultPath))
    GTEST_SKIP() << kFashionMnistDefaultPath << " not found (install Debian's dataset-fashion-mnist)";
  auto start = std::chrono::steady_clock::now();
  ImageData train = loadFashionMnist(kFashionMnistDefaultPath, true);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "loaded the 60000 Fashion-MNIST training images in " << seconds << " s\n";
  ImageData test = loadFashionMnist(kFashionMnistDefaultPath, false);
  ASSERT_EQ(train.images.sizes(), (std::vector<int64_t>{60000, 28, 28, 1}));
  ASSERT_EQ(test.images.sizes(), (std::vector<int64_t>{10000, 28, 28, 1}));
  EXPECT_GE(train.labels.min().item<int64_t>(), 0);
  EXPECT_LE(train.labels.max().item<int64_t>(), 9);
  // Fashion-MNIST is balanced (Xiao et al. 2017): 6000 training and 1000 test images per class.
  EXPECT_TRUE(at::equal(at::bincount(train.labels), at::full({10}, 6000, at::kLong)));
  EXPECT_TRUE(at::equal(at::bincount(test.labels), at::full({10}, 1000, at::kLong)));
}

}  // namespace
}  // namespace gradzip::data
