// Tests `gradzip compare` as a user runs it (through the CLI): the FP32 and
// FP16 baselines are added to a suite, a PyTorch DDP peer arm runs beside the
// gradzip arms and lands in the same summary, a rerun skips finished arms, and
// malformed suites are errors naming the key.
#include "tests/testing/ThreadGroup.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace {

struct Output {
  int status = -1;
  std::string text;
};

// Runs a shell command, stderr folded into stdout.
Output sh(const std::string& cmd) {
  Output o;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return o;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) o.text += buf;
  const int st = pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string binary() {
  const char* b = std::getenv("GRADZIP_BINARY");
  return b ? b : "";
}

}  // namespace

class CompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (binary().empty() || !fs::exists(binary())) GTEST_SKIP() << "GRADZIP_BINARY not built";
    if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "Fashion-MNIST not installed";
  }
  gradzip::testing::TempDir dir;

  std::string suite(const std::string& arms) {
    const std::string path = dir.path() + "/suite.yaml";
    std::ofstream(path) << "suite: {name: s, world_size: 2, targets: [0.3], out_dir: " << dir.path() << "}\n"
                        << "base:\n  run: {seed: 2, threads: 1}\n  model: {name: mlp}\n"
                        << "  data: {dataset: fashion_mnist, batch_size: 16}\n"
                        << "  train: {max_steps: 6, eval_every: 3, eval_batches: 1}\n"
                        << "arms:\n" << arms;
    return path;
  }
};

TEST_F(CompareTest, BaselinesAndADdpPeerArmShareOneSummary) {
  const std::string s = suite("  - {name: ddp_fp16, ddp: {hook: fp16}}\n");
  auto o = sh(binary() + " compare " + s);
  ASSERT_EQ(o.status, 0) << o.text;
  for (const char* arm : {"fp32", "fp16", "ddp_fp16"}) {
    EXPECT_TRUE(fs::exists(dir.path() + "/s/" + arm + "/tta.jsonl")) << arm;
    EXPECT_TRUE(fs::exists(dir.path() + "/s/" + arm + "/done")) << arm;
  }
  const std::string md = readFile(dir.path() + "/s/summary.md");
  EXPECT_NE(md.find("| fp32 | `fp32@engine` |"), std::string::npos) << md;
  EXPECT_NE(md.find("| fp16 | `fp16@engine` |"), std::string::npos) << md;
  EXPECT_NE(md.find("| ddp_fp16 | `ddp-fp16` |"), std::string::npos) << md;

  // A rerun trains nothing and writes the same table.
  o = sh(binary() + " compare " + s);
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("arm ddp_fp16: finished before; skipping"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("arm fp32: finished before; skipping"), std::string::npos) << o.text;
}

TEST_F(CompareTest, MalformedArmsNameTheKey) {
  auto o = sh(binary() + " compare " + suite("  - {name: x, ddp: {hook: fp16}, compress: {name: fp16}}\n"));
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("arms[0].ddp: an arm is either gradzip (compress) or PyTorch DDP (ddp)"), std::string::npos)
      << o.text;
  o = sh(binary() + " compare " + suite("  - {name: x, ddp: {hook: fp8}}\n"));
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("arms[0].ddp.hook"), std::string::npos) << o.text;
}
