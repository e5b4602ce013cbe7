// Tests of trainer/Trainer in one process (world size 1): a short run on
// Fashion-MNIST really learns; checkpoints round-trip exactly and a resumed run
// continues the loss curve bit for bit in the single-thread deterministic mode;
// a corrupt newest checkpoint falls back to the previous one; the effective
// config and TTA log are written; exported weights load in Python.
#include "comm/LocalCommunicator.h"
#include "tests/testing/ThreadGroup.h"
#include "tests/trainer/TrainerTesting.h"
#include "trainer/Checkpoint.h"
#include "trainer/Trainer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

using namespace gradzip;
namespace fs = std::filesystem;

namespace {

const char* kFmnist = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

trainer::TrainConfig config(const std::string& outDir, const std::string& extra) {
  return gradzip::testing::mlpConfig(outDir, "{name: fp32}", extra);
}

std::vector<nlohmann::json> rows(const std::string& dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(dir + "/tta.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kFmnist)) GTEST_SKIP() << "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)";
  }
  gradzip::testing::TempDir dir;
  comm::LocalCommunicator comm;
};

TEST_F(TrainerTest, ShortRunLearns) {
  // 300 steps x 32 images of an MLP: chance is 10%; a working loop reaches
  // ~80% test accuracy, so 70% separates "learns" from "broken" with margin.
  auto cfg = config(dir.path(), "train: {max_steps: 300, eval_every: 150, eval_batches: 40}\n");
  trainer::Trainer t(cfg, comm);
  auto res = t.run(false);
  EXPECT_EQ(res.steps, 300);
  ASSERT_TRUE(res.finalMetrics.count("accuracy"));
  EXPECT_GT(res.finalMetrics["accuracy"], 0.70);
  auto log = rows(cfg.runDir());
  ASSERT_EQ(log.size(), 2u);
  EXPECT_LT(log[1]["loss"].get<double>(), log[0]["loss"].get<double>());
  EXPECT_GT(log[1]["train_seconds"].get<double>(), log[0]["train_seconds"].get<double>());
  EXPECT_TRUE(fs::exists(cfg.runDir() + "/config.yaml"));
  EXPECT_TRUE(fs::exists(cfg.runDir() + "/tta.csv"));
  EXPECT_TRUE(fs::exists(cfg.runDir() + "/model.pt"));
  std::ifstream envIn(cfg.runDir() + "/environment.json");
  auto env = nlohmann::json::parse(envIn);
  EXPECT_EQ(env["world_size"].get<int>(), 1);
  EXPECT_EQ(env["intra_op_threads"].get<int>(), 1);  // deterministic mode
  EXPECT_FALSE(env["torch_version"].get<std::string>().empty());
}

TEST_F(TrainerTest, ResumeContinuesBitForBit) {
  // Uninterrupted: 60 steps. Interrupted: 30 steps, then resume to 60. In the
  // deterministic single-thread mode both must end with identical parameters
  // and identical TTA rows (losses) after step 30.
  const std::string extra = "train: {max_steps: 60, eval_every: 10, eval_batches: 2}\n";
  auto full = config(dir.path() + "/full", extra);
  trainer::Trainer(full, comm).run(false);

  auto part = config(dir.path() + "/part", "train: {max_steps: 30, eval_every: 10, eval_batches: 2}\n");
  trainer::Trainer(part, comm).run(false);
  auto resumed = config(dir.path() + "/part", extra);
  trainer::Trainer(resumed, comm).run(true);

  auto a = rows(full.runDir()), b = rows(resumed.runDir());
  ASSERT_EQ(a.size(), 6u);
  gradzip::testing::expectSamePath(a, b);
}

TEST_F(TrainerTest, ResumeFromACheckpointBetweenRowsWritesTheSameLog) {
  // Checkpoints every 7 steps, rows every 10. The interrupted run reaches step
  // 25 (rows 10, 20, 25; checkpoints 7, 14, 21, 25); its newest checkpoint is
  // then truncated, so the resume falls back to step 21 and must drop the row
  // at 25, restore the loss/time accumulators of steps 21..21 and still write
  // rows 30..60 identical to the uninterrupted run's.
  const std::string extra = "train: {max_steps: 60, eval_every: 10, eval_batches: 2, checkpoint_every: 7}\n";
  auto full = config(dir.path() + "/full", extra);
  trainer::Trainer(full, comm).run(false);

  auto part = config(dir.path() + "/part",
                     "train: {max_steps: 25, eval_every: 10, eval_batches: 2, checkpoint_every: 7}\n");
  trainer::Trainer(part, comm).run(false);
  ASSERT_EQ(rows(part.runDir()).size(), 3u);
  const std::string ck = part.runDir() + "/rank0/checkpoint.pt";
  fs::resize_file(ck, fs::file_size(ck) - 1);
  auto resumed = config(dir.path() + "/part", extra);
  trainer::Trainer(resumed, comm).run(true);

  auto a = rows(full.runDir()), b = rows(resumed.runDir());
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u) << "the row the killed run wrote after its checkpoint must be dropped";
  gradzip::testing::expectSamePath(a, b);
  // The CSV follows the same rows (header + 6).
  std::ifstream csv(resumed.runDir() + "/tta.csv");
  int lines = 0;
  for (std::string l; std::getline(csv, l);) ++lines;
  EXPECT_EQ(lines, 7);
}

TEST_F(TrainerTest, LossSpikesAreCounted) {
  // A healthy run (lr 0.05) has no step at 3x its running mean loss; with the
  // factor at 1.01 the ordinary batch-to-batch noise counts as spikes on some
  // steps but not on all. The count is per row and rows sum it.
  auto spikes = [&](const std::string& sub, double factor) {
    auto cfg = config(dir.path() + "/" + sub, "train: {max_steps: 80, eval_every: 40, eval_batches: 1, "
                                              "loss_spike_factor: " + std::to_string(factor) + "}\n");
    trainer::Trainer(cfg, comm).run(false);
    int64_t n = 0;
    for (auto& r : rows(cfg.runDir())) n += r["loss_spikes"].get<int64_t>();
    return n;
  };
  EXPECT_EQ(spikes("healthy", 3), 0);
  const int64_t noisy = spikes("noisy", 1.01);
  EXPECT_GT(noisy, 0);
  EXPECT_LT(noisy, 80 - 20);  // 20 warm-up steps are never judged
}

TEST_F(TrainerTest, CorruptNewestCheckpointFallsBackToPrevious) {
  auto cfg = config(dir.path(), "train: {max_steps: 20, eval_every: 10, eval_batches: 1}\n");
  trainer::Trainer(cfg, comm).run(false);
  const std::string ck = cfg.runDir() + "/rank0/checkpoint.pt";
  ASSERT_TRUE(fs::exists(ck));
  ASSERT_TRUE(fs::exists(cfg.runDir() + "/rank0/checkpoint.prev.pt"));
  fs::resize_file(ck, fs::file_size(ck) / 2);  // truncate the newest
  double step = -1;
  const auto used = trainer::readCheckpoint(cfg.runDir() + "/rank0", [&](torch::serialize::InputArchive& ar) {
    step = trainer::readScalar(ar, "state/step");
  });
  EXPECT_EQ(used, cfg.runDir() + "/rank0/checkpoint.prev.pt");
  EXPECT_EQ(step, 10);
  // Both corrupt: a clear error, never a silent fresh start.
  const std::string prev = cfg.runDir() + "/rank0/checkpoint.prev.pt";
  fs::resize_file(prev, 100);
  EXPECT_THROW(trainer::readCheckpoint(cfg.runDir() + "/rank0", [](torch::serialize::InputArchive&) {}), UserError);
}

TEST(Checkpoint, RoundTripIsExact) {
  gradzip::testing::TempDir dir;
  auto g = at::make_generator<at::CPUGeneratorImpl>(1);
  auto a = torch::randn({17, 3}, g), b = torch::randint(0, 1000, {5}, g);
  trainer::writeCheckpoint(dir.path(), 7, [&](torch::serialize::OutputArchive& ar) {
    ar.write("a", a);
    ar.write("b", b);
    trainer::writeScalar(ar, "x", 0.1 + 0.2);
  });
  torch::Tensor a2, b2;
  double x = 0;
  trainer::readCheckpoint(dir.path(), [&](torch::serialize::InputArchive& ar) {
    ar.read("a", a2);
    ar.read("b", b2);
    x = trainer::readScalar(ar, "x");
  });
  const auto files = trainer::validCheckpoints(dir.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].step, 7);  // from the sidecar, without loading the archive
  EXPECT_TRUE(torch::equal(a, a2));
  EXPECT_TRUE(torch::equal(b, b2));
  EXPECT_EQ(x, 0.1 + 0.2);
}

TEST(Checkpoint, ExportedWeightsLoadInPython) {
  const char* py = std::getenv("GRADZIP_PYTHON");
  if (!py || !fs::exists(py)) GTEST_SKIP() << "GRADZIP_PYTHON not available";
  gradzip::testing::TempDir dir;
  const std::string path = dir.path() + "/w.pt";
  trainer::exportStateDict(path, {{"layer.weight", torch::arange(6).reshape({2, 3}).to(torch::kFloat)}});
  const std::string cmd = std::string(py) + " -c \"import torch; d = torch.load('" + path +
                          "', weights_only=False); assert d['layer.weight'].shape == (2, 3); assert float(d['layer.weight'].sum()) == 15.0\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(TrainConfig, OverridesAndStrictErrors) {
  gradzip::testing::TempDir dir;
  const std::string path = dir.path() + "/c.yaml";
  std::ofstream(path) << "model: {name: mlp}\ndata: {dataset: fashion_mnist}\ncompress:\n  name: fp16\n  colective: ps\n";
  try {
    trainer::TrainConfig::load(path);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":5: compress.colective: unknown key"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "model: {name: mlp}\ndata: {dataset: fashion_mnist}\n";
  auto c = trainer::TrainConfig::load(path, {"train.max_steps=7", "compress.name=bf16"});
  EXPECT_EQ(c.train.maxSteps, 7);
  EXPECT_EQ(c.plan.compressor, "bf16");
  EXPECT_THROW(trainer::TrainConfig::load(path, {"train.max_steps"}), ConfigError);
  EXPECT_THROW(trainer::TrainConfig::load(path, {"compress.name=fp17"}), ConfigError);
  // A compressor's own option checks name the --set argument and the key too
  // (thc: g = 15 < 2^5 - 1), not a line of the file, which does not hold them.
  try {
    trainer::TrainConfig::load(path, {"compress.name=thc", "compress.collective=ps", "compress.thc={bits: 5, granularity: 15}"});
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--set compress.thc={bits: 5, granularity: 15}: compress.thc: "),
              std::string::npos)
        << e.what();
  }
  // b = 5 without a granularity gets a valid default (2^5 - 1).
  EXPECT_NO_THROW(
      trainer::TrainConfig::load(path, {"compress.name=thc", "compress.collective=ps", "compress.thc={bits: 5}"}));
}

TEST(TrainConfig, NetworkBlock) {
  gradzip::testing::TempDir dir;
  const std::string path = dir.path() + "/c.yaml";
  const std::string base = "model: {name: mlp}\ndata: {dataset: fashion_mnist}\n";
  std::ofstream(path) << base;
  EXPECT_FALSE(trainer::TrainConfig::load(path).network.has_value());

  std::ofstream(path) << base << "network: {mbit: 20}\n";
  auto c = trainer::TrainConfig::load(path);
  ASSERT_TRUE(c.network.has_value());
  ASSERT_EQ(c.network->schedule.steps().size(), 1u);
  EXPECT_EQ(c.network->schedule.steps()[0].mbit, 20.0);
  EXPECT_FALSE(c.toYaml()["network"]["ranks"].IsDefined()) << "ranks come from the launch";

  std::ofstream(path) << base << "network:\n  schedule: [{at: 0, mbit: 50}, {at: 30, mbit: unshaped}]\n";
  c = trainer::TrainConfig::load(path);
  ASSERT_EQ(c.network->schedule.steps().size(), 2u);
  EXPECT_FALSE(c.network->schedule.steps()[1].mbit.has_value());

  auto error = [&](const std::string& block) {
    std::ofstream(path) << base << block;
    try {
      trainer::TrainConfig::load(path);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("network: {mbit: fast}\n").find(path + ":3: network.mbit: "), std::string::npos)
      << error("network: {mbit: fast}\n");
  EXPECT_NE(error("network: {ranks: 2, mbit: 20}\n").find("network.ranks: the rank count comes from"),
            std::string::npos);
  EXPECT_NE(error("network: {mbit: 20, schedule: [{at: 0, mbit: 5}]}\n").find("either mbit"), std::string::npos);
  EXPECT_NE(error("network: {schedule: [{at: 5, mbit: 5}]}\n").find("first step must start at 0"), std::string::npos);
}
