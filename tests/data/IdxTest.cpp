// Tests data/Idx.h and data/GzReader.h: valid IDX files (gzip and plain) read
// back exactly; every corruption gives an error naming the file and the problem.
#include "data/Idx.h"

#include "tests/data/DataTestFiles.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gradzip::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace gradzip::data::testing;

std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 7 + 3);
  return v;
}

std::string errorOf(const std::string& path) {
  try {
    readIdx(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Idx, ReadsGzipAndPlainFilesExactly) {
  gradzip::testing::TempDir dir;
  auto data = ramp(5 * 4 * 3);
  std::string bytes = idxBytes({5, 4, 3}, data);
  writeGz(dir.path() + "/a.gz", bytes);
  writeFile(dir.path() + "/a", bytes);
  for (const char* name : {"/a.gz", "/a"}) {
    IdxArray a = readIdx(dir.path() + name);
    EXPECT_EQ(a.dims, (std::vector<int64_t>{5, 4, 3}));
    ASSERT_EQ(a.data.sizes(), (std::vector<int64_t>{5, 4, 3}));
    const uint8_t* p = a.data.data_ptr<uint8_t>();
    EXPECT_TRUE(std::equal(data.begin(), data.end(), p)) << name;
    // Row-major: element [i][j][k] is byte i*12 + j*3 + k of the payload.
    EXPECT_EQ(a.data[2][1][2].item<uint8_t>(), data[2 * 12 + 1 * 3 + 2]);
  }
}

TEST(Idx, BadMagicNamesFileAndBytes) {
  gradzip::testing::TempDir dir;
  std::string path = dir.path() + "/bad.gz";
  std::string bytes = idxBytes({2}, {1, 2});
  bytes[0] = 0x1f;
  writeGz(path, bytes);
  EXPECT_THAT(errorOf(path), AllOf(HasSubstr(path), HasSubstr("bad magic 0x1f000801")));
}

TEST(Idx, UnsupportedElementType) {
  gradzip::testing::TempDir dir;
  std::string path = dir.path() + "/float.gz";
  writeGz(path, idxBytes({1}, {0, 0, 0, 0}, 0x0D));
  EXPECT_THAT(errorOf(path), AllOf(HasSubstr(path), HasSubstr("unsupported IDX element type 0x0d")));
}

TEST(Idx, TruncatedHeaderAndDataReportTheByteOffset) {
  gradzip::testing::TempDir dir;
  std::string full = idxBytes({4, 5}, ramp(20));  // 4 + 8 header bytes + 20 data bytes
  std::string header = dir.path() + "/header.gz";
  writeGz(header, full.substr(0, 9));  // magic + 5 of the 8 dimension bytes
  EXPECT_THAT(errorOf(header), AllOf(HasSubstr(header), HasSubstr("truncated at byte 9")));
  std::string data = dir.path() + "/data.gz";
  writeGz(data, full.substr(0, 12 + 13));
  EXPECT_THAT(errorOf(data), AllOf(HasSubstr(data), HasSubstr("truncated at byte 25"), HasSubstr("[4, 5]"),
                                   HasSubstr("32 bytes in all")));
  std::string tiny = dir.path() + "/tiny";
  writeFile(tiny, std::string(2, '\0'));
  EXPECT_THAT(errorOf(tiny), HasSubstr("truncated at byte 2"));
}

TEST(Idx, ExtraBytesMeanWrongDimensions) {
  gradzip::testing::TempDir dir;
  std::string path = dir.path() + "/long.gz";
  writeGz(path, idxBytes({3}, ramp(4)));
  EXPECT_THAT(errorOf(path), AllOf(HasSubstr(path), HasSubstr("wrong dimensions [3]")));
}

TEST(Idx, CorruptGzipStreamIsReported) {
  gradzip::testing::TempDir dir;
  std::string good = dir.path() + "/good.gz";
  writeGz(good, idxBytes({100, 100}, ramp(10000)));
  std::string compressed = readFile(good);
  std::string cut = dir.path() + "/cut.gz";
  writeFile(cut, compressed.substr(0, compressed.size() / 2));
  EXPECT_THAT(errorOf(cut), AllOf(HasSubstr(cut), HasSubstr("corrupt or truncated gzip data")));
  std::string flipped = dir.path() + "/flipped.gz";
  std::string damaged = compressed;
  for (size_t i = 20; i < 40; ++i) damaged[i] = char(~damaged[i]);
  writeFile(flipped, damaged);
  EXPECT_THAT(errorOf(flipped), HasSubstr(flipped));
}

// Regression (review while writing tests/fuzz IdxFuzz): dimensions whose product overflows
// int64 were multiplied before the size check (UBSan: signed overflow).
TEST(Idx, DimensionsWhoseProductOverflowsAreRefused) {
  gradzip::testing::TempDir dir;
  std::string path = dir.path() + "/overflow";
  writeFile(path, idxBytes({0xffffffffu, 0xffffffffu, 0xffffffffu}, {}));
  EXPECT_THAT(errorOf(path), AllOf(HasSubstr(path), HasSubstr("wrong dimensions [4294967295, 4294967295"),
                                   HasSubstr("implausibly large")));
  // The fuzzer's input: a zero dimension made the element count 0, but the other
  // two overflowed at::empty's stride computation (an uncaught c10::Error).
  std::string zero = dir.path() + "/zero-dim";
  writeFile(zero, idxBytes({0, 0xffffffffu, 0xff000000u}, {0, 0, 0, 0x1c, 0, 0, 0, 0x1c}));
  EXPECT_THAT(errorOf(zero), AllOf(HasSubstr(zero), HasSubstr("wrong dimensions [0, 4294967295, 4278190080]"),
                                   HasSubstr("implausibly large")));
}

// Regression (review for tests/fuzz IdxFuzz): a corrupt header allocated the size it declared
// (up to 2^40 bytes) before reading a byte of data. It is now checked against
// what the file can hold: exactly for a plain file, at most 1032x for gzip.
TEST(Idx, DeclaredSizeIsCheckedAgainstTheFileBeforeAllocating) {
  gradzip::testing::TempDir dir;
  std::string plain = dir.path() + "/plain";
  writeFile(plain, idxBytes({1u << 20, 1u << 19}, ramp(10)));  // 2^39 bytes declared, 10 present
  EXPECT_THAT(errorOf(plain), AllOf(HasSubstr(plain), HasSubstr("truncated at byte 22"),
                                    HasSubstr("549755813888 data bytes")));
  std::string gz = dir.path() + "/small.gz";
  writeGz(gz, idxBytes({1u << 20, 1u << 19}, ramp(10)));
  EXPECT_THAT(errorOf(gz), AllOf(HasSubstr(gz), HasSubstr("wrong dimensions [1048576, 524288]"),
                                 HasSubstr("more than a"), HasSubstr("-byte gzip file can hold")));
}

TEST(Idx, MissingFile) {
  EXPECT_THAT(errorOf("/nonexistent/x.gz"), HasSubstr("/nonexistent/x.gz: no such file"));
}

}  // namespace
}  // namespace gradzip::data
