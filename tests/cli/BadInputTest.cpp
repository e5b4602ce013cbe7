// Regression tests of bad input and faults as a new user meets them (the
// `gradzip` CLI as a real process): a rank that finds something other than
// the store on MASTER_PORT, running a config again over its results, a skip
// policy that would report success on a dead model, silently accepted input
// (duplicate YAML keys, an unknown log level, a mistyped subcommand), errors
// that named the wrong cause (--set values, rank 0's invalid checkpoints, a
// rank without a master, an empty config, an unwritable out_dir, CUDA where it
// cannot run), and the
// progress display (a live line on a terminal, plain lines in pipes, one
// rank's start-up lines). Each asserts the exit code, that the message names
// the cause, and that nothing is lost or left behind.
#include "tests/testing/LoopbackListener.h"
#include "tests/testing/Process.h"
#include "tests/testing/ThreadGroup.h"
#include "launch/Launcher.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using gradzip::testing::Output;

namespace {

std::string binary() { return gradzip::testing::gradzipBinary(); }
Output run(const std::string& cmd, std::chrono::seconds timeout = 60s) {
  return gradzip::testing::runCommand(cmd, timeout);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

using SilentListener = gradzip::testing::LoopbackListener;

// A 1-rank MLP run of 4 steps on Fashion-MNIST, evaluated and checkpointed
// every 2 steps, in dir/t.
std::string writeTiny(const std::string& dir, const std::string& train = "") {
  const std::string cfg = dir + "/tiny.yaml";
  std::ofstream(cfg) << "run: {name: t, out_dir: " << dir << ", seed: 1}\n"
                     << "model: {name: mlp, mlp: {hidden: [16]}}\n"
                     << "data: {dataset: fashion_mnist, batch_size: 16}\n"
                     << "train: {max_steps: 4, eval_every: 2, eval_batches: 1, checkpoint_every: 2" << train << "}\n"
                     << "compress: {name: fp32}\n";
  return cfg;
}

const char* kFmnist = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    if (binary().empty() || !fs::exists(binary())) GTEST_SKIP() << "GRADZIP_BINARY not set or not built";
  }
  void needData() {
    if (!fs::exists(kFmnist)) GTEST_SKIP() << "Fashion-MNIST not installed";
  }
};

}  // namespace

TEST_F(BadInput, RankOneFailsWithinTimeoutWhenSomethingElseListensOnMasterPort) {
  gradzip::testing::TempDir dir;
  SilentListener other;
  ASSERT_GT(other.port, 0);
  const std::string cfg = writeTiny(dir.path());
  const auto t0 = std::chrono::steady_clock::now();
  auto o = run("GRADZIP_COMM_TIMEOUT_S=3 RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                   std::to_string(other.port) + " " + binary() + " train " + cfg,
               40s);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(o.status, 3) << o.text;
  EXPECT_NE(o.text.find("rank 1: 127.0.0.1:" + std::to_string(other.port) +
                        " accepted the connection but did not answer as a rendezvous store within 3 s"),
            std::string::npos) << o.text;
  EXPECT_NE(o.text.find("another program"), std::string::npos) << o.text;
  EXPECT_LT(took, 15s) << o.text;
  EXPECT_FALSE(fs::exists(dir.path() + "/t")) << "a rank that never joined wrote into the run directory";
}

TEST_F(BadInput, RankOneWithoutMasterPrintsOneClearLine) {
  gradzip::testing::TempDir dir;
  const int port = gradzip::trainer::pickFreePort();  // nobody listens there
  auto o = run("GRADZIP_COMM_TIMEOUT_S=2 RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                   std::to_string(port) + " " + binary() + " train " + writeTiny(dir.path()),
               40s);
  EXPECT_EQ(o.status, 3) << o.text;
  EXPECT_NE(o.text.find("rank 1: cannot reach the rendezvous store at 127.0.0.1:" + std::to_string(port)),
            std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("frame #"), std::string::npos) << "c10d's C++ backtrace reached the user:\n" << o.text;
  EXPECT_LE(count(o.text, "\n"), 2u) << o.text;
}

TEST_F(BadInput, RunningAgainRefusesToOverwriteUnlessAsked) {
  needData();
  gradzip::testing::TempDir dir;
  const std::string cfg = writeTiny(dir.path());
  const std::string run0 = dir.path() + "/t";
  auto o = run(binary() + " train " + cfg);
  ASSERT_EQ(o.status, 0) << o.text;
  const std::string model = readFile(run0 + "/model.pt"), tta = readFile(run0 + "/tta.jsonl"),
                    ckpt = readFile(run0 + "/rank0/checkpoint.pt");
  ASSERT_FALSE(model.empty());
  ASSERT_TRUE(fs::exists(run0 + "/rank0/checkpoint.prev.pt"));

  // Again, without --resume: refused, and the first run's results intact.
  o = run(binary() + " train " + cfg);
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("the run directory " + run0 + " holds an earlier run's results (config.yaml"),
            std::string::npos) << o.text;
  for (const char* way : {"--resume", "--overwrite", "run.name"})
    EXPECT_NE(o.text.find(way), std::string::npos) << way << "\n" << o.text;
  EXPECT_EQ(readFile(run0 + "/model.pt"), model);
  EXPECT_EQ(readFile(run0 + "/tta.jsonl"), tta);
  EXPECT_EQ(readFile(run0 + "/rank0/checkpoint.pt"), ckpt);

  // --overwrite replaces every result, including a rank directory the new
  // world size does not have and the old run's older checkpoint.
  fs::create_directories(run0 + "/rank1");
  std::ofstream(run0 + "/rank1/checkpoint.pt") << "stale";
  o = run(binary() + " train " + cfg + " --overwrite --set train.max_steps=2");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_FALSE(fs::exists(run0 + "/rank1")) << "a stale rank directory was left behind";
  EXPECT_FALSE(fs::exists(run0 + "/rank0/checkpoint.prev.pt")) << "the old run's checkpoint was left behind";
  EXPECT_EQ(count(readFile(run0 + "/tta.jsonl"), "\n"), 1u) << readFile(run0 + "/tta.jsonl");
  // --resume of the overwritten run finds its own checkpoint.
  o = run(binary() + " train " + cfg + " --resume");
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("at step 2"), std::string::npos) << o.text;

  o = run(binary() + " train " + cfg + " --resume --overwrite");
  EXPECT_NE(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("--resume excludes --overwrite"), std::string::npos) << o.text;
}

TEST_F(BadInput, SkippingNonFiniteStepsHasABound) {
  needData();
  gradzip::testing::TempDir dir;
  // lr 100 diverges within a few steps; every later gradient is non-finite.
  const std::string cfg = writeTiny(dir.path(), ", nan_policy: skip");
  auto o = run(binary() + " train " + cfg + " --set optim.lr=100 --set train.max_steps=60 --set train.eval_every=5");
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("steps in a row had non-finite gradients"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("train.nan_skip_max_run = 10"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("done:"), std::string::npos) << o.text;
  // The TTA rows show the skipped steps, and a loss that was never finite
  // as null rather than 0.
  const std::string tta = readFile(dir.path() + "/t/tta.jsonl");
  EXPECT_NE(tta.find("\"skipped_steps\":5"), std::string::npos) << tta;
  EXPECT_EQ(tta.find("\"loss\":0.0,"), std::string::npos) << tta;
  EXPECT_NE(o.text.find("steps skipped"), std::string::npos) << o.text;
}

TEST_F(BadInput, SilentlyAcceptedInputIsAnError) {
  gradzip::testing::TempDir dir;
  const std::string dup = dir.path() + "/dup.yaml";
  std::ofstream(dup) << "model: {name: mlp}\ndata:\n  batch_size: 64\n  batch_size: 128\n";
  auto o = run(binary() + " train " + dup);
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find(dup + ":4: data.batch_size: duplicate key (first given on line 3)"), std::string::npos)
      << o.text;

  o = run(binary() + " --log-level bogus version");
  EXPECT_NE(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("bogus"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("trace"), std::string::npos) << "valid levels not listed:\n" << o.text;
  o = run("GRADZIP_LOG_LEVEL=loud " + binary() + " version");
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("GRADZIP_LOG_LEVEL: unknown log level 'loud' (valid: trace, debug, info"), std::string::npos)
      << o.text;

  o = run(binary() + " trian " + dup);
  EXPECT_EQ(o.status, 109) << o.text;
  EXPECT_NE(o.text.find("gradzip: unknown subcommand 'trian' (valid: "), std::string::npos) << o.text;
  {
    const auto from = o.text.find("(valid: "), to = o.text.find(')', from);
    ASSERT_NE(to, std::string::npos) << o.text;
    const std::string listed = o.text.substr(from + 8, to - from - 8) + ",";
    for (const char* sub : {"version", "config", "train", "launch", "compare", "simulate", "bench"})
      EXPECT_NE(listed.find(std::string(sub) + ","), std::string::npos) << "not listed: " << sub << "\n" << o.text;
  }
  EXPECT_NE(o.text.find("did you mean 'train'?"), std::string::npos) << o.text;
  o = run(binary() + " bench colectives");
  EXPECT_EQ(o.status, 109) << o.text;
  EXPECT_NE(o.text.find("gradzip bench: unknown subcommand 'colectives'"), std::string::npos) << o.text;
}

TEST_F(BadInput, ErrorsNameTheirCause) {
  gradzip::testing::TempDir dir;
  const std::string cfg = writeTiny(dir.path());
  auto o = run(binary() + " train " + cfg + " --set train.epochs=abc");
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("--set train.epochs=abc: train.epochs: expected number"), std::string::npos) << o.text;
  o = run(binary() + " train " + cfg + " --set train.bogus=1");
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("--set train.bogus=1: train.bogus: unknown key"), std::string::npos) << o.text;

  const std::string empty = dir.path() + "/empty.yaml";
  std::ofstream(empty) << "# nothing yet\n";
  o = run(binary() + " train " + empty);
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find(empty + ": the config file is empty"), std::string::npos) << o.text;

  // out_dir below a regular file cannot be created, whoever runs the test.
  std::ofstream(dir.path() + "/afile") << "x";
  o = run(binary() + " train " + cfg + " --set run.out_dir=" + dir.path() + "/afile/runs");
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("run.out_dir: cannot write the run directory " + dir.path() + "/afile/runs/t/rank0"),
            std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("critical"), std::string::npos) << o.text;
}

TEST_F(BadInput, CudaWhereItCannotRunNamesWhatIsMissing) {
  needData();
  gradzip::testing::TempDir dir;
  const std::string cfg = writeTiny(dir.path());
  auto o = run(binary() + " train " + cfg + " --set run.device=cuda");
  if (o.status == 0) GTEST_SKIP() << "a GPU ran the run";
  EXPECT_EQ(o.status, 2) << o.text;
  const bool named = o.text.find("run.device: cuda, but no GPU is visible to this process") != std::string::npos ||
                     o.text.find("run.device: cuda, but this gradzip was built without CUDA") != std::string::npos;
  EXPECT_TRUE(named) << o.text;
  EXPECT_EQ(o.text.find("fashion"), std::string::npos) << "the device must fail before any data is read:\n" << o.text;
}

TEST_F(BadInput, RankZerosInvalidCheckpointIsTheReportedCause) {
  needData();
  gradzip::testing::TempDir dir;
  const std::string cfg = writeTiny(dir.path());
  auto o = run(binary() + " launch -n 2 " + cfg);
  ASSERT_EQ(o.status, 0) << o.text;
  for (const char* f : {"checkpoint.pt", "checkpoint.prev.pt"}) std::ofstream(dir.path() + "/t/rank0/" + f) << "torn";
  const std::string rank1 = readFile(dir.path() + "/t/rank1/checkpoint.pt");
  o = run(binary() + " launch -n 2 " + cfg + " --resume");
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("cannot resume: rank 0: " + dir.path() + "/t/rank0: no valid checkpoint"),
            std::string::npos) << o.text;
  // The launcher names rank 0 as the cause (with rank 1's exit code 3 as
  // following from it when that came first); rank 1 names rank 0 too.
  EXPECT_NE(o.text.find("launch: rank 0 failed with exit code 2"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("launch: rank 1 failed"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("rank 1: cannot resume: rank 0 has no valid checkpoint"), std::string::npos) << o.text;
  EXPECT_EQ(readFile(dir.path() + "/t/rank1/checkpoint.pt"), rank1) << "rank 1's checkpoint changed";
}

TEST_F(BadInput, ProgressIsALiveLineOnATerminalAndPlainInPipes) {
  needData();
  gradzip::testing::TempDir dir;
  const std::string cfg = writeTiny(dir.path());
  // Two ranks into a pipe: plain lines only, and rank 1 does not repeat rank
  // 0's start-up lines.
  auto o = run(binary() + " launch -n 2 " + cfg);
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_EQ(o.text.find('\r'), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("[rank 0/2] [info] model mlp"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("[rank 1/2] [info]"), std::string::npos) << o.text;
  // On a terminal (script(1) gives the run a pseudo-terminal): the live
  // line, redrawn in place.
  if (run("command -v script").status != 0) GTEST_SKIP() << "script(1) not installed";
  o = run("script -qec '" + binary() + " train " + cfg + " --overwrite' /dev/null");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("\r\033[Kstep 4/4 (100%) epoch "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find(" | ETA "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("accuracy"), std::string::npos) << o.text;
}
