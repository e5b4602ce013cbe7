// Tests data/Cifar10.h on generated record files: exact pixels after the
// planar -> interleaved reorder, the nested directory, and clear errors for
// missing files, partial records and bad labels.
#include "data/Cifar10.h"

#include "tests/data/DataTestFiles.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace gradzip::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace gradzip::data::testing;

// `n` records whose labels are (first + i) % 10 and whose pixels are pixel(first + i, y, x, c).
std::string records(int64_t first, int64_t n) {
  std::string s;
  for (int64_t i = first; i < first + n; ++i) {
    s.push_back(char(i % 10));
    for (int c = 0; c < 3; ++c)  // planes R, G, B; each 32 rows of 32
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) s.push_back(char(pixel(i, y, x, c)));
  }
  return s;
}

void writeCifar(const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (int b = 1; b <= 5; ++b) writeFile(dir + "/data_batch_" + std::to_string(b) + ".bin", records(3 * (b - 1), 3));
  writeFile(dir + "/test_batch.bin", records(100, 2));
}

std::string errorOf(const std::string& dir, bool train) {
  try {
    loadCifar10(dir, train);
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Cifar10, ReadsRecordsAsInterleavedRgb) {
  gradzip::testing::TempDir tmp;
  std::string dir = tmp.path() + "/cifar-10-batches-bin";
  writeCifar(dir);
  // Both the batches directory and its parent work.
  for (const std::string& root : {dir, tmp.path()}) {
    ImageData train = loadCifar10(root, true);
    ASSERT_EQ(train.images.sizes(), (std::vector<int64_t>{15, 32, 32, 3}));
    for (int64_t i : {0, 7, 14}) {
      EXPECT_EQ(train.labels[i].item<int64_t>(), i % 10);
      for (auto [y, x, c] : {std::tuple{0, 0, 0}, {31, 2, 1}, {5, 30, 2}})
        EXPECT_EQ(train.images[i][y][x][c].item<uint8_t>(), pixel(i, y, x, c)) << i << " " << y << x << c;
    }
    ImageData test = loadCifar10(root, false);
    ASSERT_EQ(test.size(), 2);
    EXPECT_EQ(test.images[1][9][8][2].item<uint8_t>(), pixel(101, 9, 8, 2));
    EXPECT_EQ(test.classNames[test.labels[0].item<int64_t>()], "airplane");  // label 100 % 10 = 0
  }
}

TEST(Cifar10, MissingFileSaysWhereToGetCifar) {
  gradzip::testing::TempDir tmp;
  writeCifar(tmp.path());
  std::filesystem::remove(tmp.path() + "/data_batch_4.bin");
  EXPECT_THAT(errorOf(tmp.path(), true),
              AllOf(HasSubstr(tmp.path() + "/data_batch_4.bin"), HasSubstr("cifar-10-binary.tar.gz")));
}

TEST(Cifar10, PartialRecordIsTruncation) {
  gradzip::testing::TempDir tmp;
  writeCifar(tmp.path());
  writeFile(tmp.path() + "/test_batch.bin", records(0, 2).substr(0, 3073 + 100));
  EXPECT_THAT(errorOf(tmp.path(), false),
              AllOf(HasSubstr("test_batch.bin"), HasSubstr("truncated at byte 3173"), HasSubstr("record 1")));
}

TEST(Cifar10, LabelOutOfRange) {
  gradzip::testing::TempDir tmp;
  writeCifar(tmp.path());
  std::string r = records(0, 3);
  r[2 * 3073] = 10;
  writeFile(tmp.path() + "/data_batch_2.bin", r);
  EXPECT_THAT(errorOf(tmp.path(), true), AllOf(HasSubstr("data_batch_2.bin"), HasSubstr("record 2"),
                                                HasSubstr("label 10")));
}

}  // namespace
}  // namespace gradzip::data
