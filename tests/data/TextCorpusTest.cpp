// Tests data/TextCorpus.h: gathering .rst.gz/.txt files (gzip through zlib),
// the deterministic train/valid hold-out, the WikiText-103 layout, and errors.
#include "data/TextCorpus.h"

#include "tests/data/DataTestFiles.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

namespace gradzip::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace gradzip::data::testing;

TEST(TextCorpus, GathersRstGzAndPlainTextInSortedOrder) {
  gradzip::testing::TempDir tmp;
  std::filesystem::create_directories(tmp.path() + "/Documentation/sub");
  writeGz(tmp.path() + "/Documentation/sub/b.rst.gz", "second doc\n");
  writeGz(tmp.path() + "/Documentation/a.rst.gz", "first doc\n");
  writeFile(tmp.path() + "/Documentation/c.txt", "third doc\n");
  writeGz(tmp.path() + "/Documentation/d.yaml.gz", "ignored: true\n");  // not a text extension
  TextCorpus train = TextCorpus::load({tmp.path() + "/Documentation"}, TextSplit::kTrain);
  TextCorpus valid = TextCorpus::load({tmp.path() + "/Documentation"}, TextSplit::kValid);
  // Sorted paths: a.rst.gz, c.txt, sub/b.rst.gz; with fewer than 50 files the last is held out.
  EXPECT_EQ(train.documents(), (std::vector<std::string>{"first doc\n", "third doc\n"}));
  EXPECT_EQ(valid.documents(), (std::vector<std::string>{"second doc\n"}));
  EXPECT_EQ(train.bytes(), 20);
  // Gzipped .txt files are collected only when asked for (linux-doc's are binding schemas).
  writeGz(tmp.path() + "/Documentation/b.txt.gz", "gzipped txt\n");
  EXPECT_EQ(TextCorpus::load({tmp.path() + "/Documentation"}, TextSplit::kTrain).documents().size(), 2u);
  auto withTxtGz = TextCorpus::load({tmp.path() + "/Documentation"}, TextSplit::kTrain, {".rst.gz", ".txt.gz"});
  EXPECT_EQ(withTxtGz.documents(), (std::vector<std::string>{"first doc\n", "gzipped txt\n"}));
}

TEST(TextCorpus, HoldsOutEveryFiftiethDocumentDisjointly) {
  gradzip::testing::TempDir tmp;
  for (int i = 0; i < 120; ++i) writeFile(fmt::format("{}/f{:03d}.txt", tmp.path(), i), fmt::format("doc {}\n", i));
  auto train = TextCorpus::load({tmp.path()}, TextSplit::kTrain).documents();
  auto valid = TextCorpus::load({tmp.path()}, TextSplit::kValid).documents();
  EXPECT_EQ(valid, (std::vector<std::string>{"doc 49\n", "doc 99\n"}));
  EXPECT_EQ(train.size(), 118u);
  std::set<std::string> all(train.begin(), train.end());
  all.insert(valid.begin(), valid.end());
  EXPECT_EQ(all.size(), 120u);
}

TEST(TextCorpus, SingleFileSplitsItsLines) {
  gradzip::testing::TempDir tmp;
  std::string text;
  for (int i = 0; i < 100; ++i) text += fmt::format("line {}\n", i);
  writeFile(tmp.path() + "/one.raw", text);
  auto train = TextCorpus::load({tmp.path() + "/one.raw"}, TextSplit::kTrain).documents();
  auto valid = TextCorpus::load({tmp.path() + "/one.raw"}, TextSplit::kValid).documents();
  ASSERT_EQ(train.size(), 1u);
  ASSERT_EQ(valid.size(), 1u);
  EXPECT_EQ(valid[0], "line 98\nline 99\n");  // the last 2% of 100 lines
  EXPECT_EQ(train[0] + valid[0], text);
}

TEST(TextCorpus, WikiTextLayoutUsesItsSplitFilesAndArticles) {
  gradzip::testing::TempDir tmp;
  writeFile(tmp.path() + "/wiki.train.tokens",
            " \n = Alpha = \n \n text a \n = = Section = = \n more a \n = Beta = \n text b \n");
  writeFile(tmp.path() + "/wiki.valid.tokens", " = Gamma = \n text g \n");
  writeFile(tmp.path() + "/wiki.test.tokens", " = Delta = \n");
  auto train = TextCorpus::load({tmp.path()}, TextSplit::kTrain).documents();
  auto valid = TextCorpus::load({tmp.path()}, TextSplit::kValid).documents();
  ASSERT_EQ(train.size(), 2u);  // Alpha (with its section) and Beta; the blank preamble is dropped
  EXPECT_EQ(train[0], " = Alpha = \n \n text a \n = = Section = = \n more a \n");
  EXPECT_EQ(train[1], " = Beta = \n text b \n");
  EXPECT_EQ(valid, (std::vector<std::string>{" = Gamma = \n text g \n"}));
}

TEST(TextCorpus, FingerprintSeesContentAndBoundaries) {
  auto a = TextCorpus::fromDocuments({"ab", "c"}, "x").fingerprint();
  EXPECT_EQ(a, TextCorpus::fromDocuments({"ab", "c"}, "y").fingerprint());
  EXPECT_NE(a, TextCorpus::fromDocuments({"a", "bc"}, "x").fingerprint());
  EXPECT_NE(a, TextCorpus::fromDocuments({"ab", "d"}, "x").fingerprint());
}

TEST(TextCorpus, ErrorsNameThePath) {
  gradzip::testing::TempDir tmp;
  auto errorOf = [](const std::vector<std::string>& paths) {
    try {
      TextCorpus::load(paths, TextSplit::kTrain);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_THAT(errorOf({tmp.path() + "/missing"}), HasSubstr("missing: text corpus path not found"));
  EXPECT_THAT(errorOf({tmp.path()}), AllOf(HasSubstr(tmp.path()), HasSubstr("no text files")));
  writeFile(tmp.path() + "/a.txt", "fine\n");  // sorts last: the held-out document
  std::string good = tmp.path() + "/good.gz";
  std::string text(5000, 'x');
  text += "some text that compresses\n";
  writeGz(good, text);
  std::string gz = readFile(good);
  std::filesystem::remove(good);
  writeFile(tmp.path() + "/0bad.rst.gz", gz.substr(0, gz.size() - 12));  // cut the stream and its trailer
  EXPECT_THAT(errorOf({tmp.path()}), AllOf(HasSubstr("0bad.rst.gz"), HasSubstr("corrupt or truncated gzip")));
}

// Regression (review for tests/fuzz TextFuzz): an empty single-file corpus read lines[0] of
// an empty vector (std::clamp with lo > hi) and crashed.
TEST(TextCorpus, EmptySingleFileIsAnError) {
  gradzip::testing::TempDir tmp;
  std::string path = tmp.path() + "/empty.txt";
  writeFile(path, "");
  for (auto split : {TextSplit::kTrain, TextSplit::kValid}) {
    try {
      TextCorpus::load({path}, split);
      ADD_FAILURE() << "an empty file loaded";
    } catch (const UserError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr(path), HasSubstr("split of the text corpus is empty")));
    }
  }
}

// Regression (review for tests/fuzz TextFuzz): gzip data in a file not named .gz was
// decompressed into a buffer of the file's compressed size and silently cut.
TEST(TextCorpus, GzipDataUnderAnyNameIsReadWhole) {
  gradzip::testing::TempDir tmp;
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "line " + std::to_string(i) + " of a very compressible text\n";
  std::string path = tmp.path() + "/notes.txt";
  writeGz(path, text);
  ASSERT_LT(std::filesystem::file_size(path), text.size() / 4);
  TextCorpus train = TextCorpus::load({path}, TextSplit::kTrain);
  TextCorpus valid = TextCorpus::load({path}, TextSplit::kValid);
  EXPECT_EQ(train.documents().at(0) + valid.documents().at(0), text);
}

}  // namespace
}  // namespace gradzip::data

namespace gradzip::data {
namespace {

TEST(TextCorpus, RealLinuxDocWhenInstalled) {
  std::string root = defaultTextCorpusPath();
  if (root.empty()) GTEST_SKIP() << "Debian's linux-doc is not installed (/usr/share/doc/linux-doc-*/Documentation)";
  size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    std::string name = e.path().filename().string();
    files += e.is_regular_file() && name.size() > 7 && name.compare(name.size() - 7, 7, ".rst.gz") == 0;
  }
  TextCorpus train = TextCorpus::load({root}, TextSplit::kTrain);
  TextCorpus valid = TextCorpus::load({root}, TextSplit::kValid);
  // Every .rst.gz file (and no .txt.gz/.yaml.gz) is one document; 1 in 50 is held out.
  EXPECT_EQ(train.documents().size() + valid.documents().size(), files);
  EXPECT_EQ(valid.documents().size(), files / 50);
  EXPECT_GT(train.bytes(), 1'000'000);
  EXPECT_NE(train.documents()[0].find_first_not_of(" \n"), std::string::npos);
}

}  // namespace
}  // namespace gradzip::data
