// Tests of rate schedules in epochs end to end on the trainer side: the
// progress file rank 0 writes (launch/ProgressFile.h: atomic round trip,
// tolerant reads, throttled writer) and an emulated `gradzip launch` with a
// schedule in epochs (launch/EmulatedLaunch.cpp) whose fake rank writes the
// file and sees its link reshaped. The launch test needs root and the built
// binary (GRADZIP_BINARY), and skips otherwise.
#include "launch/ProgressFile.h"
#include "tests/testing/Process.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using gradzip::trainer::ProgressFileWriter;
using gradzip::trainer::readProgressFile;
using gradzip::trainer::writeProgressFile;

namespace {

void writeRaw(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

using gradzip::testing::Output;
// Runs a shell command, stderr folded into stdout, killed after 120 s.
Output sh(const std::string& cmd) { return gradzip::testing::runCommand(cmd, std::chrono::seconds(120)); }

}  // namespace

TEST(ProgressFile, RoundTripsAndLeavesNoTemporary) {
  gradzip::testing::TempDir dir;
  const std::string f = dir.path() + "/progress";
  EXPECT_FALSE(readProgressFile(f).has_value());  // not written yet
  writeProgressFile(f, 0.0);
  EXPECT_EQ(readProgressFile(f), 0.0);
  writeProgressFile(f, 2.375);
  EXPECT_EQ(readProgressFile(f), 2.375);  // exactly representable, 6 decimals suffice
  EXPECT_FALSE(fs::exists(f + ".tmp"));
  std::ifstream in(f);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "2.375000");
}

TEST(ProgressFile, MalformedContentReadsAsNoProgress) {
  gradzip::testing::TempDir dir;
  const std::string f = dir.path() + "/progress";
  for (const char* bad : {"", "\n", "abc\n", "1.5 epochs\n", "-1\n", "nan\n", "inf\n", "1.5\n2.5\n"}) {
    writeRaw(f, bad);
    EXPECT_FALSE(readProgressFile(f).has_value()) << '"' << bad << '"';
  }
  writeRaw(f, "3.25 \n");
  EXPECT_EQ(readProgressFile(f), 3.25);
}

TEST(ProgressFile, BadInputIsAUserErrorNamingThePath) {
  gradzip::testing::TempDir dir;
  try {
    writeProgressFile(dir.path() + "/missing/progress", 1.0);
    FAIL() << "expected UserError";
  } catch (const gradzip::UserError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path() + "/missing/progress"), std::string::npos) << e.what();
  }
  EXPECT_THROW(writeProgressFile(dir.path() + "/p", -0.5), gradzip::UserError);
}

TEST(ProgressFile, WriterThrottlesAndFlushWritesTheLastValue) {
  gradzip::testing::TempDir dir;
  const std::string f = dir.path() + "/progress";
  ProgressFileWriter w(f, std::chrono::hours(1));
  ASSERT_TRUE(w.active());
  w.update(0.1);  // the first update always writes
  EXPECT_EQ(readProgressFile(f), 0.1);
  w.update(0.2);  // within the interval: kept back
  EXPECT_EQ(readProgressFile(f), 0.1);
  w.flush();
  EXPECT_EQ(readProgressFile(f), 0.2);

  ProgressFileWriter every(f, std::chrono::milliseconds(0));
  every.update(0.3);
  every.update(0.4);
  EXPECT_EQ(readProgressFile(f), 0.4);

  ProgressFileWriter off("");
  EXPECT_FALSE(off.active());
  off.update(9.0);
  off.flush();
  EXPECT_EQ(readProgressFile(f), 0.4);
}

TEST(EpochSchedule, EmulatedLaunchFollowsTheEpochRankZeroWrites) {
  const char* bin = std::getenv("GRADZIP_BINARY");
  if (!bin || !fs::exists(bin)) GTEST_SKIP() << "GRADZIP_BINARY not set or not built";
  if (geteuid() != 0) GTEST_SKIP() << "network emulation needs root";
  // Rank 0 checks its link is unshaped at epoch 0 (first step), reports epoch
  // 1.5 through the file, and polls its own qdisc (bounded, 20 s) until the
  // launcher has applied the second step's 20 Mbit/s.
  const std::string rank0 =
      "test -n \"$GRADZIP_PROGRESS_FILE\" || { echo NO_PROGRESS_FILE; exit 3; }; "
      "echo PFILE:/$GRADZIP_PROGRESS_FILE; "
      "tc qdisc show dev eth0 | grep -q tbf && { echo SHAPED_TOO_EARLY; exit 4; }; "
      "echo 1.5 > \"$GRADZIP_PROGRESS_FILE.tmp\" && mv \"$GRADZIP_PROGRESS_FILE.tmp\" \"$GRADZIP_PROGRESS_FILE\"; "
      "i=0; while [ $i -lt 200 ]; do "
      "  tc qdisc show dev eth0 | grep -q \"rate 20Mbit\" && { echo FOLLOWED_EPOCH; exit 0; }; "
      "  sleep 0.1; i=$((i+1)); done; echo NOT_FOLLOWED; tc qdisc show dev eth0; exit 5";
  const std::string script = "if [ \"$RANK\" = 0 ]; then " + rank0 + "; else echo RANK1_NETWORK=$GRADZIP_NETWORK; fi";
  auto o = sh(std::string(bin) + " launch -n 2 --net 0e:unshaped,1e:20 -- sh -c '" + script + "'");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("FOLLOWED_EPOCH"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("RANK1_NETWORK=0e:unshaped,1e:20"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("epoch 1.500 rate 20 Mbit/s"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("no rank wrote"), std::string::npos) << o.text;
  // The progress file's directory is private to the launch and removed with it.
  const auto at = o.text.find("PFILE://");
  ASSERT_NE(at, std::string::npos) << o.text;
  const std::string file = o.text.substr(at + 7, o.text.find('\n', at) - at - 7);
  EXPECT_NE(file.find("gradzip-progress-"), std::string::npos) << file;
  EXPECT_FALSE(fs::exists(fs::path(file).parent_path())) << file;
}
