// Tests data/ImageFolder.h on folders written with cv::imwrite: labels by sorted
// class name, exact RGB pixels (PNG is lossless), resizing, a test split that
// must share the training classes, and errors naming the bad file.
#include "data/ImageFolder.h"

#include "tests/data/DataTestFiles.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>

#include <filesystem>
#include <vector>

namespace gradzip::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace gradzip::data::testing;

// Writes a 6x8 BGR image whose RGB value at (y, x, c) is pixel(n, y, x, c).
void writeImage(const std::string& path, int64_t n) {
  cv::Mat m(6, 8, CV_8UC3);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 8; ++x)
      for (int c = 0; c < 3; ++c) m.at<cv::Vec3b>(y, x)[2 - c] = pixel(n, y, x, c);  // OpenCV stores BGR
  ASSERT_TRUE(cv::imwrite(path, m));
}

void writeFolder(const std::string& root) {
  std::filesystem::create_directories(root + "/zebra");
  std::filesystem::create_directories(root + "/ant");
  writeImage(root + "/zebra/b.png", 1);
  writeImage(root + "/zebra/a.png", 0);
  writeImage(root + "/ant/x.png", 2);
  writeFile(root + "/ant/notes.txt", "not an image");  // ignored: not an image extension
}

std::string errorOf(const std::string& root, const ImageFolderOptions& o) {
  try {
    loadImageFolder(root, o);
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ImageFolder, LabelsBySortedClassAndExactRgbPixels) {
  gradzip::testing::TempDir tmp;
  writeFolder(tmp.path());
  ImageData d = loadImageFolder(tmp.path(), {6, 8, 3, 2, {}});
  EXPECT_EQ(d.classNames, (std::vector<std::string>{"ant", "zebra"}));
  ASSERT_EQ(d.images.sizes(), (std::vector<int64_t>{3, 6, 8, 3}));
  // Order: ant/x.png, zebra/a.png, zebra/b.png.
  EXPECT_TRUE(at::equal(d.labels, at::tensor({0, 1, 1}, at::kLong)));
  int64_t source[] = {2, 0, 1};
  for (int64_t i = 0; i < 3; ++i)
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 8; ++x)
        for (int c = 0; c < 3; ++c) ASSERT_EQ(d.images[i][y][x][c].item<uint8_t>(), pixel(source[i], y, x, c));
}

TEST(ImageFolder, ResizesAndConvertsToGrayscale) {
  gradzip::testing::TempDir tmp;
  writeFolder(tmp.path());
  ImageData d = loadImageFolder(tmp.path(), {3, 4, 1, 1, {}});
  ASSERT_EQ(d.images.sizes(), (std::vector<int64_t>{3, 3, 4, 1}));
  // A uniform image stays uniform under INTER_AREA shrinking.
  std::filesystem::create_directories(tmp.path() + "/ant");
  cv::Mat flat(6, 8, CV_8UC3, cv::Scalar(40, 40, 40));
  cv::imwrite(tmp.path() + "/ant/x.png", flat);
  ImageData g = loadImageFolder(tmp.path(), {3, 4, 1, 1, {}});
  EXPECT_TRUE(at::equal(g.images[0], at::full({3, 4, 1}, 40, at::kByte)));
}

TEST(ImageFolder, UnreadableImageNamesTheFile) {
  gradzip::testing::TempDir tmp;
  writeFolder(tmp.path());
  writeFile(tmp.path() + "/zebra/broken.png", "\x89PNG garbage");
  EXPECT_THAT(errorOf(tmp.path(), {6, 8, 3, 2, {}}),
              AllOf(HasSubstr(tmp.path() + "/zebra/broken.png"), HasSubstr("cannot decode image")));
}

// Regression (review for tests/fuzz ImageFuzz): OpenCV allocates the size a header declares
// before reading pixels; a 20-byte PGM claiming 20000x20000 made it reserve 1.2 GB.
// decodeImage refuses such an allocation (kMaxDecodedImageBytes).
TEST(ImageFolder, HeaderDeclaringAHugeImageIsRefusedBeforeDecoding) {
  ImageFolderOptions o{4, 4, 3, 1, {}};
  std::vector<uint8_t> dst(4 * 4 * 3);
  try {
    decodeImage("P5\n20000 20000\n255\n\x01\x02", "huge.pgm", o, dst.data());
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("huge.pgm: cannot decode image"), HasSubstr("1144 MiB of pixels"),
                                HasSubstr("more than the 256 MiB limit")));
  }
}

// Regression (review for tests/fuzz ImageFuzz): OpenCV's own header limits (width over 2^20)
// throw a cv::Exception past imdecode, which escaped the reader; an empty file
// tripped an assertion inside imdecode.
TEST(ImageFolder, OpenCvRefusalsAndEmptyFilesAreUserErrors) {
  gradzip::testing::TempDir tmp;
  writeFolder(tmp.path());
  writeFile(tmp.path() + "/ant/wide.pgm", std::string("P5\n2000000 1\n255\n") + std::string(64, '\x7f'));
  EXPECT_THAT(errorOf(tmp.path(), {6, 8, 3, 2, {}}),
              AllOf(HasSubstr(tmp.path() + "/ant/wide.pgm: cannot decode image"), HasSubstr("width")));
  std::filesystem::remove(tmp.path() + "/ant/wide.pgm");
  writeFile(tmp.path() + "/zebra/empty.jpg", "");
  EXPECT_THAT(errorOf(tmp.path(), {6, 8, 3, 2, {}}),
              HasSubstr(tmp.path() + "/zebra/empty.jpg: cannot decode image: the file is empty"));
}

TEST(ImageFolder, EmptyOrMissingRootAndUnknownClass) {
  gradzip::testing::TempDir tmp;
  EXPECT_THAT(errorOf(tmp.path(), {}), HasSubstr("no class directories"));
  EXPECT_THAT(errorOf(tmp.path() + "/nope", {}), HasSubstr("image folder not found"));
  writeFolder(tmp.path());
  ImageFolderOptions o{6, 8, 3, 1, {"ant", "bee"}};  // training classes without "zebra"
  EXPECT_THAT(errorOf(tmp.path(), o), HasSubstr("class directory 'zebra' is not one of the 2 training classes"));
}

}  // namespace
}  // namespace gradzip::data
