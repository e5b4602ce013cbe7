// Tests `gradzip compare` as a user runs it (through the CLI): the FP32 and
// FP16 baselines are added to a suite, a PyTorch DDP peer arm runs beside the
// gradzip arms and lands in the same summary (with bits per coordinate, shares
// and the comm-free bound), repeats run with consecutive seeds and report their
// spread, a network sweep runs gradzip and DDP arms inside emulated networks
// (root only), a failed run is reported while the other arms still run, an
// interrupted compare stops the suite, a rerun skips finished arms but refuses
// runs whose arm config changed since, a run another suite finished with the
// same config and executable is copied, and malformed suites are errors naming
// the key. The dry run has its own file, CompareDryRunTest.cpp.
#include "experiments/Compare.h"
#include "tests/testing/Process.h"
#include "tests/testing/ThreadGroup.h"
#include "trainer/TrainConfig.h"
#include "util/Error.h"
#include "util/Yaml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace {

using gradzip::testing::Output;
// Runs a shell command, stderr folded into stdout, killed after 600 s.
Output sh(const std::string& cmd) { return gradzip::testing::runCommand(cmd, std::chrono::seconds(600)); }

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json armJson(const nlohmann::json& summary, const std::string& arm) {
  for (const auto& a : summary)
    if (a["arm"] == arm) return a;
  return nullptr;
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

  // The extra columns, and their closed-form values: FP32 sends 4 bytes and
  // FP16 2 bytes per parameter per step through the engine all-reduce, and the
  // DDP fp16 hook the same as FP16.
  for (const char* col : {"| never reached |", "| comm-free s |", "| TTA / comm-free |", "| exposed comm % |",
                          "| enc+dec % |", "| bits/coord |", "| vNMSE¹ |", "¹ vNMSE = ||x − C(x)||² / ||x||²"})
    EXPECT_NE(md.find(col), std::string::npos) << col << "\n" << md;
  const auto js = nlohmann::json::parse(readFile(dir.path() + "/s/summary.json"));
  const auto fp32 = armJson(js, "fp32"), fp16 = armJson(js, "fp16"), ddp = armJson(js, "ddp_fp16");
  ASSERT_FALSE(fp32.is_null() || fp16.is_null() || ddp.is_null()) << js.dump(2);
  EXPECT_GT(fp32["parameters"].get<int64_t>(), 100000) << fp32.dump(2);  // the MLP on 28x28 inputs
  EXPECT_NEAR(fp32["bits_per_coordinate"].get<double>(), 32.0, 0.5) << fp32.dump(2);
  EXPECT_NEAR(fp16["bits_per_coordinate"].get<double>(), 16.0, 0.25) << fp16.dump(2);
  EXPECT_NEAR(ddp["bits_per_coordinate"].get<double>(), 16.0, 0.25) << ddp.dump(2);
  for (const auto& a : {fp32, fp16}) {
    EXPECT_GT(a["comm_free_seconds"].get<double>(), 0.0) << a.dump(2);
    EXPECT_LE(a["comm_free_seconds"].get<double>(), a["train_seconds"].get<double>()) << a.dump(2);
    EXPECT_GE(a["exposed_share"].get<double>(), 0.0) << a.dump(2);
    EXPECT_LE(a["exposed_share"].get<double>() + a["encode_decode_share"].get<double>(), 1.0) << a.dump(2);
  }
  // vNMSE from the TTA rows: FP32 is exact; FP16's round to nearest leaves
  // a relative error below 2^-22 per coordinate (2^-11 relative, squared).
  EXPECT_EQ(fp32["vnmse"].get<double>(), 0.0) << fp32.dump(2);
  EXPECT_GT(fp16["vnmse"].get<double>(), 0.0) << fp16.dump(2);
  EXPECT_LT(fp16["vnmse"].get<double>(), std::ldexp(1.0, -22)) << fp16.dump(2);
  EXPECT_TRUE(ddp["vnmse"].is_null()) << ddp.dump(2);
  EXPECT_TRUE(ddp["comm_free_seconds"].is_null()) << ddp.dump(2);  // DDP does not split communication out
  EXPECT_TRUE(ddp["exposed_share"].is_null()) << ddp.dump(2);
  // Utility of FP16 over itself is 1 wherever a target was reached; a target
  // nobody reached is listed as never reached.
  if (!fp16["utility_vs_fp16"].is_null()) {
    EXPECT_DOUBLE_EQ(fp16["utility_vs_fp16"].get<double>(), 1.0);
  }
  EXPECT_EQ(fp16["never_reached"].size(), fp16["reached"][0].get<int>() == 1 ? 0u : 1u) << fp16.dump(2);

  // A rerun trains nothing and writes the same table.
  o = sh(binary() + " compare " + s);
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("arm ddp_fp16: finished before; skipping"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("arm fp32: finished before; skipping"), std::string::npos) << o.text;

  // Once the suite is edited, the finished runs no longer match their arms:
  // an error naming each of them, not a skip that summarises the old runs.
  {
    std::string text = readFile(s);
    text.replace(text.find("max_steps: 6"), 12, "max_steps: 5");
    std::ofstream(s) << text;
  }
  o = sh(binary() + " compare " + s);
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("3 finished run(s) trained a different config"), std::string::npos) << o.text;
  for (const char* arm : {"fp32", "fp16", "ddp_fp16"})
    EXPECT_NE(o.text.find(dir.path() + "/s/" + arm), std::string::npos) << arm << "\n" << o.text;
  EXPECT_EQ(o.text.find("skipping"), std::string::npos) << o.text;
}

// A run that fails (here a DDP peer whose interpreter exits 1 at once, as a
// diverging compressor under nan_policy: error or a dead rank would) does not
// stop the suite: the arms after it still train, the summary marks it failed,
// and compare then exits 2 naming it. A rerun retries only the failed run.
TEST_F(CompareTest, AFailedRunIsReportedAndTheOtherArmsStillRun) {
  const std::string s = suite("  - {name: ddp_fp16, ddp: {hook: fp16}}\n  - {name: fp16_again, compress: {name: fp16}}\n");
  auto o = sh("GRADZIP_PYTHON=/bin/false " + binary() + " compare " + s);
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("1 run(s) failed: ddp_fp16 (exit status 1; " + dir.path() + "/s/ddp_fp16)"),
            std::string::npos)
      << o.text;
  EXPECT_EQ(readFile(dir.path() + "/s/ddp_fp16/failed"), "exit status 1\n");
  EXPECT_FALSE(fs::exists(dir.path() + "/s/ddp_fp16/done"));
  for (const char* arm : {"fp32", "fp16", "fp16_again"})
    EXPECT_TRUE(fs::exists(dir.path() + "/s/" + arm + "/done")) << arm << "\n" << o.text;
  const std::string md = readFile(dir.path() + "/s/summary.md");
  EXPECT_NE(md.find("| ddp_fp16 | **failed** (exit status 1), no rows |"), std::string::npos) << md;
  EXPECT_NE(md.find("| fp16_again | `fp16@engine` |"), std::string::npos) << md;
  const auto js = nlohmann::json::parse(readFile(dir.path() + "/s/summary.json"));
  EXPECT_EQ(armJson(js, "ddp_fp16")["failed"], nlohmann::json::array({"exit status 1"})) << js.dump(2);
  EXPECT_EQ(armJson(js, "fp16_again")["failed"], nlohmann::json::array()) << js.dump(2);

  o = sh("GRADZIP_PYTHON=/bin/false " + binary() + " compare " + s);
  EXPECT_EQ(o.status, 2) << o.text;
  for (const char* arm : {"fp32", "fp16", "fp16_again"})
    EXPECT_NE(o.text.find(std::string("arm ") + arm + ": finished before; skipping"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("arm ddp_fp16 failed (exit status 1)"), std::string::npos) << o.text;
}

TEST_F(CompareTest, InterruptingCompareStopsTheSuite) {
  // SIGTERM to `gradzip compare` while its first run (the fp16 baseline)
  // trains: the launcher takes the signal and stops that run's ranks, and
  // compare must then stop too, naming the signal and the arm, instead of
  // starting the next run. The runs are long (20000 steps); the shell waits
  // for the first one's first TTA row, so the signal lands mid-run.
  std::string s = suite("  - {name: fp16_again, compress: {name: fp16}}\n");
  {
    std::string text = readFile(s);
    text.replace(text.find("max_steps: 6"), 12, "max_steps: 20000");
    std::ofstream(s) << text;
  }
  const std::string rows = dir.path() + "/s/fp16/tta.jsonl";
  auto o = sh("{ " + binary() + " compare " + s + " & pid=$!; for i in $(seq 600); do [ -s " + rows +
              " ] && break; sleep 0.1; done; kill -TERM $pid; wait $pid; echo \"compare exited $?\"; }");
  EXPECT_NE(o.text.find("compare exited 2"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("compare: interrupted by Terminated during arm fp16"), std::string::npos) << o.text;
  EXPECT_EQ(readFile(dir.path() + "/s/fp16/failed"), "interrupted by Terminated\n");
  EXPECT_FALSE(fs::exists(dir.path() + "/s/fp16/done"));
  EXPECT_FALSE(fs::exists(dir.path() + "/s/fp32")) << o.text;  // the next run never started
  EXPECT_FALSE(fs::exists(dir.path() + "/s/fp16_again")) << o.text;
}

// Suite s trains fp16; suite s2, the same setup under another name, copies it
// (byte-identical TTA log, provenance in reused_from and in the summary)
// and trains fp32, which s never ran; s3 with one step fewer and s4 with
// --no-reuse train their own. The dry run of a fresh suite names the copy.
TEST_F(CompareTest, AnotherSuitesFinishedRunIsCopiedNotRetrained) {
  const std::string s = suite("");
  auto variant = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string text = readFile(s);
    text.replace(text.find("{name: s,"), 9, "{name: " + name + ",");
    if (!from.empty()) text.replace(text.find(from), from.size(), to);
    const std::string path = dir.path() + "/" + name + ".yaml";
    std::ofstream(path) << text;
    return path;
  };
  auto o = sh(binary() + " compare " + s + " --only fp16");
  ASSERT_EQ(o.status, 0) << o.text;
  const std::string original = dir.path() + "/s/fp16";
  ASSERT_TRUE(fs::exists(original + "/done"));
  EXPECT_EQ(readFile(original + "/environment.json").find("\"executable_fingerprint\": \"\""), std::string::npos);

  o = sh(binary() + " compare " + variant("s2", "", "") + " --only fp16 fp32");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("arm fp16: copied " + original), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("arm fp32: copied"), std::string::npos) << o.text;
  EXPECT_EQ(readFile(dir.path() + "/s2/fp16/reused_from"), original + "\n");
  EXPECT_EQ(readFile(dir.path() + "/s2/fp16/tta.jsonl"), readFile(original + "/tta.jsonl"));
  EXPECT_TRUE(fs::exists(dir.path() + "/s2/fp32/done"));
  EXPECT_FALSE(fs::exists(dir.path() + "/s2/fp32/reused_from"));
  EXPECT_NE(readFile(dir.path() + "/s2/summary.md").find("- fp16: the run of " + original), std::string::npos);

  o = sh(binary() + " compare " + variant("s3", "max_steps: 6", "max_steps: 5") + " --only fp16");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_FALSE(fs::exists(dir.path() + "/s3/fp16/reused_from")) << o.text;
  o = sh(binary() + " compare " + variant("s4", "", "") + " --only fp16 --no-reuse");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_FALSE(fs::exists(dir.path() + "/s4/fp16/reused_from")) << o.text;
  o = sh(binary() + " compare " + variant("s5", "", "") + " --dry-run");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("(would copy " + original + ")"), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(dir.path() + "/s5")) << "a dry run must not create run directories";
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

TEST_F(CompareTest, RepeatsRunWithConsecutiveSeedsAndReportTheSpread) {
  std::string path = suite("  - {name: fp16, compress: {name: fp16}}\n");
  {
    std::string text = readFile(path);
    text.replace(text.find("suite: {name: s,"), 16, "suite: {name: s, repeats: 2,");
    std::ofstream(path) << text;
  }
  auto o = sh(binary() + " compare " + path + " --only fp16");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(readFile(dir.path() + "/s/fp16/arm.yaml").find("seed: 2"), std::string::npos);
  EXPECT_NE(readFile(dir.path() + "/s/fp16.r1/arm.yaml").find("seed: 3"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir.path() + "/s/fp16.r1/done"));
  EXPECT_FALSE(fs::exists(dir.path() + "/s/fp32"));  // --only
  const auto js = nlohmann::json::parse(readFile(dir.path() + "/s/summary.json"));
  const auto fp16 = armJson(js, "fp16");
  ASSERT_FALSE(fp16.is_null()) << js.dump(2);
  EXPECT_EQ(fp16["repeats"], 2);
  EXPECT_EQ(fp16["runs_ok"], 2);
  ASSERT_EQ(fp16["runs"].size(), 2u);
  const auto& lo = fp16["time_to_target_min"][0];
  const auto& hi = fp16["time_to_target_max"][0];
  const auto& mean = fp16["time_to_target"][0];
  if (!mean.is_null()) {
    EXPECT_LE(lo.get<double>(), mean.get<double>());
    EXPECT_LE(mean.get<double>(), hi.get<double>());
  }
  const double m0 = fp16["runs"][0]["final_metric"], m1 = fp16["runs"][1]["final_metric"];
  EXPECT_DOUBLE_EQ(fp16["final_metric"].get<double>(), (m0 + m1) / 2);
  EXPECT_DOUBLE_EQ(fp16["final_metric_min"].get<double>(), std::min(m0, m1));
  const std::string md = readFile(dir.path() + "/s/summary.md");
  EXPECT_NE(md.find("| fp16 | `fp16@engine` | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| fp32 | (not run) |"), std::string::npos) << md;
}

TEST_F(CompareTest, NetworkSweepRunsGradzipAndDdpArmsInsideNamespaces) {
  if (geteuid() != 0) GTEST_SKIP() << "network emulation needs root";
  // A DDP peer inside a namespace must bind eth0 (GLOO_SOCKET_IFNAME) and get
  // a config without the `network` section its reader does not know.
  std::string path = suite("  - {name: ddp_fp16, ddp: {hook: fp16}}\n");
  {
    std::string text = readFile(path);
    text.replace(text.find("suite: {name: s,"), 16,
                 "suite: {name: s, networks: [{name: n50, mbit: 50}, {name: host}],");
    std::ofstream(path) << text;
  }
  auto o = sh(binary() + " compare " + path);
  ASSERT_EQ(o.status, 0) << o.text;
  for (const char* net : {"n50", "host"})
    for (const char* arm : {"fp32", "fp16", "ddp_fp16"})
      EXPECT_TRUE(fs::exists(dir.path() + "/s/" + net + "/" + arm + "/done")) << net << "/" << arm;
  EXPECT_NE(readFile(dir.path() + "/s/n50/fp16/arm.yaml").find("network:"), std::string::npos);
  EXPECT_EQ(readFile(dir.path() + "/s/n50/ddp_fp16/arm.yaml").find("network:"), std::string::npos);
  EXPECT_EQ(readFile(dir.path() + "/s/host/fp16/arm.yaml").find("network:"), std::string::npos);
  EXPECT_NE(readFile(dir.path() + "/s/n50/fp16/environment.json").find("\"network\": \"0:50\""), std::string::npos);
  const std::string md = readFile(dir.path() + "/s/summary.md");
  EXPECT_NE(md.find("# s / n50 (2 ranks, network 0:50 Mbit/s): time to accuracy"), std::string::npos) << md;
  EXPECT_NE(md.find("# s / host (2 ranks, host network): time to accuracy"), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(dir.path() + "/s/n50/summary.md"));
  const auto js = nlohmann::json::parse(readFile(dir.path() + "/s/summary.json"));
  ASSERT_TRUE(js.contains("networks")) << js.dump(2);
  EXPECT_FALSE(armJson(js["networks"]["n50"], "ddp_fp16").is_null()) << js.dump(2);
  EXPECT_EQ(armJson(js["networks"]["n50"], "ddp_fp16")["plan"], "ddp-fp16") << js.dump(2);
}
