// Tests util/Hash.h and util/Median.h: a file's size and FNV-1a against the
// published FNV-1a 64 test vectors, the fingerprint of an empty file (the
// offset basis) against that of a missing one (""), and the median of odd,
// even and empty samples.
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"
#include "util/Hash.h"
#include "util/Median.h"

#include <gtest/gtest.h>

#include <fstream>

TEST(FileHash, SizeAndFnv1aOfAFile) {
  gradzip::testing::TempDir dir;
  const std::string a = dir.path() + "/a", empty = dir.path() + "/empty";
  std::ofstream(a) << "a";
  std::ofstream{empty};
  // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c; of "" the offset basis.
  EXPECT_EQ(gradzip::fileSizeAndHash(a), std::make_pair(uint64_t(1), uint64_t(0xaf63dc4c8601ec8cULL)));
  EXPECT_EQ(gradzip::fileFingerprint(a), "af63dc4c8601ec8c");
  EXPECT_EQ(gradzip::fileSizeAndHash(empty), std::make_pair(uint64_t(0), uint64_t(0xcbf29ce484222325ULL)));
  EXPECT_EQ(gradzip::fileFingerprint(empty), "cbf29ce484222325");
  EXPECT_EQ(gradzip::fileSizeAndHash(dir.path() + "/missing"), std::make_pair(uint64_t(0), uint64_t(0)));
  EXPECT_EQ(gradzip::fileFingerprint(dir.path() + "/missing"), "");
}

TEST(Median, OddEvenAndEmpty) {
  EXPECT_EQ(gradzip::median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(gradzip::median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_THROW(gradzip::median({}), gradzip::UserError);
}
