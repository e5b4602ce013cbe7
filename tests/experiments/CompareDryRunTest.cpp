// Tests the dry run of `gradzip compare`, called directly
// (experiments/Compare.h compareCommand): it prints every run of a suite (arms
// x networks x repeats, each with its seed and plan), trains nothing and
// creates no run directory, gives each arm its own plan once the baselines are
// added, fails on bad arms and networks before any training, and accepts every
// suite in experiments/suites/.
#include "experiments/Compare.h"
#include "tests/testing/ThreadGroup.h"
#include "trainer/BuildInfo.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Runs a dry run in this process and returns what it printed.
std::string dryRun(const std::string& suitePath, const std::vector<std::string>& only = {}) {
  gradzip::experiments::CompareArgs args;
  args.suite = suitePath;
  args.only = only;
  args.dryRun = true;
  ::testing::internal::CaptureStdout();
  try {
    gradzip::experiments::compareCommand(args, "/nonexistent/gradzip");
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  return ::testing::internal::GetCapturedStdout();
}

}  // namespace

TEST(CompareDryRun, PrintsEveryRunAndTrainsNothing) {
  gradzip::testing::TempDir dir;
  const std::string path = dir.path() + "/sweep.yaml";
  std::ofstream(path) << "suite:\n  name: sw\n  world_size: 2\n  repeats: 2\n  out_dir: " << dir.path()
                      << "\n  networks: [{name: 10M, mbit: 10}, {name: c1, schedule: [{epoch: 0, mbit: 50}, "
                         "{epoch: 1, mbit: 5}]}, {name: host}]\n"
                      << "base:\n  run: {seed: 7}\n  model: {name: mlp}\n  data: {dataset: fashion_mnist}\n"
                      << "  train: {max_steps: 10}\n"
                      << "arms:\n  - {name: ddp_psgd, ddp: {hook: powersgd, powersgd_rank: 2}}\n";
  const std::string out = dryRun(path);
  EXPECT_NE(out.find("3 arms x 3 network(s) x 2 repeat(s) = 18 runs on 2 ranks"), std::string::npos) << out;
  EXPECT_NE(out.find("[10M] fp32 "), std::string::npos) << out;
  EXPECT_NE(out.find("[c1] fp16.r1 "), std::string::npos) << out;
  EXPECT_NE(out.find("0e:50,1e:5 Mbit/s"), std::string::npos) << out;
  EXPECT_NE(out.find("[host] ddp_psgd.r1 "), std::string::npos) << out;
  EXPECT_NE(out.find("seed 8"), std::string::npos) << out;  // repeat 1 = seed + 1
  EXPECT_NE(out.find("ddp hook powersgd rank 2"), std::string::npos) << out;
  EXPECT_NE(out.find("gradzip fp16@engine"), std::string::npos) << out;
  EXPECT_NE(out.find(dir.path() + "/sw/10M/fp32.r1"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir.path() + "/sw")) << "a dry run must not create run directories";

  // --only restricts the plan to that arm.
  const std::string only = dryRun(path, {"ddp_psgd"});
  EXPECT_EQ(only.find("fp32"), std::string::npos) << only;
  EXPECT_THROW(dryRun(path, {"nope"}), gradzip::UserError);
}

TEST(CompareDryRun, AddedBaselinesLeaveEveryArmItsOwnPlan) {
  // Two gradzip arms, so adding both baselines once shifted arms inside the
  // vector, and yaml-cpp's shared nodes gave each arm its neighbour's plan.
  gradzip::testing::TempDir dir;
  const std::string path = dir.path() + "/arms.yaml";
  std::ofstream(path) << "suite: {name: a, out_dir: " << dir.path() << "}\n"
                      << "base:\n  model: {name: mlp}\n  data: {dataset: fashion_mnist}\n"
                      << "arms:\n  - {name: thc4, compress: {name: thc, collective: ps, thc: {bits: 4}}}\n"
                      << "  - {name: topkc2, compress: {name: topkc, topkc: {bits: 2}}}\n"
                      << "  - {name: ddp, ddp: {hook: fp16}}\n";
  const std::string out = dryRun(path);
  auto lineOf = [&](const std::string& arm) {
    const auto at = out.find("\n  " + arm + " ");
    return at == std::string::npos ? std::string() : out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(lineOf("fp16").find("gradzip fp16@engine"), std::string::npos) << out;
  EXPECT_NE(lineOf("fp32").find("gradzip fp32@engine"), std::string::npos) << out;
  EXPECT_NE(lineOf("thc4").find("gradzip thc{bits: 4}@ps"), std::string::npos) << out;
  EXPECT_NE(lineOf("topkc2").find("gradzip topkc{bits: 2}@engine"), std::string::npos) << out;
  EXPECT_NE(lineOf("ddp").find("ddp hook fp16"), std::string::npos) << out;
  EXPECT_LT(out.find("\n  fp16 "), out.find("\n  fp32 ")) << out;  // baselines first
  EXPECT_LT(out.find("\n  fp32 "), out.find("\n  thc4 ")) << out;
}

TEST(CompareDryRun, BadArmsAndNetworksFailBeforeAnyTraining) {
  gradzip::testing::TempDir dir;
  auto write = [&](const std::string& suiteExtra, const std::string& baseExtra, const std::string& arms) {
    const std::string path = dir.path() + "/bad.yaml";
    std::ofstream(path) << "suite: {name: b, out_dir: " << dir.path() << suiteExtra << "}\n"
                        << "base:\n  model: {name: mlp}\n  data: {dataset: fashion_mnist}\n" << baseExtra
                        << "arms:\n" << arms;
    return path;
  };
  auto expectError = [&](const std::string& path, const std::string& what) {
    try {
      dryRun(path);
      ADD_FAILURE() << "expected an error containing " << what;
    } catch (const gradzip::UserError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expectError(write("", "", "  - {name: x, compress: {name: topkk}}\n"), "compress.name");
  expectError(write(", networks: [{name: a, mbit: 10}]", "  network: {mbit: 20}\n", "  - {name: x, compress: {name: fp16}}\n"),
              "must not set `network` when suite.networks");
  expectError(write("", "", "  - {name: a/b, compress: {name: fp16}}\n"), "arms[0].name");
  expectError(write(", repeats: 0", "", "  - {name: x, compress: {name: fp16}}\n"), "suite.repeats");
  expectError(write(", networks: [{name: a, mbit: 10}, {name: a, mbit: 5}]", "", "  - {name: x, compress: {name: fp16}}\n"),
              "duplicate network name 'a'");
  EXPECT_FALSE(fs::exists(dir.path() + "/b"));
}

TEST(CompareDryRun, EverySuiteInTheRepositoryParses) {
  const fs::path suites = fs::path(gradzip::trainer::sourceDir()) / "experiments" / "suites";
  if (!fs::exists(suites)) GTEST_SKIP() << suites << " does not exist";
  int n = 0;
  for (const auto& entry : fs::directory_iterator(suites)) {
    if (entry.path().extension() != ".yaml") continue;
    ++n;
    std::string out;
    EXPECT_NO_THROW(out = dryRun(entry.path().string())) << entry.path();
    EXPECT_NE(out.find("dry run: every config parsed"), std::string::npos) << entry.path() << "\n" << out;
    // Every suite runs the controller arm (`compress: {name: auto}`).
    EXPECT_NE(out.find("gradzip auto (controller)"), std::string::npos) << entry.path() << ": no auto arm\n" << out;
  }
  EXPECT_GE(n, 13) << "suites under " << suites;
  EXPECT_NO_THROW(dryRun(std::string(gradzip::trainer::sourceDir()) + "/configs/quickstart.yaml"));
}
