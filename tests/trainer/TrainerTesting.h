// Test helpers for tests/trainer: the small deterministic training config the
// trainer and controller tests share (an MLP on Fashion-MNIST, one thread,
// constant learning rate), with the `compress:` section and further YAML
// (train, comm, ...) given by the test; and the check that two runs took the
// same path.
#pragma once

#include "trainer/TrainConfig.h"
#include "util/Yaml.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace gradzip::testing {

inline trainer::TrainConfig mlpConfig(const std::string& outDir, const std::string& compress,
                                      const std::string& extra,
                                      const std::string& optim = "{name: sgd, lr: 0.05, momentum: 0.9}") {
  const std::string text = "run: {name: t, out_dir: " + outDir +
                           ", seed: 5, deterministic: true}\n"
                           "model: {name: mlp, mlp: {hidden: [64]}}\n"
                           "data: {dataset: fashion_mnist, batch_size: 32, prefetch: 2}\n"
                           "optim: " + optim + "\n"
                           "schedule: {name: constant}\n"
                           "compress: " +
                           compress + "\n" + extra;
  auto r = YamlReader::loadString(text, "test.yaml");
  return trainer::TrainConfig::fromYaml(r);
}

// Two runs' TTA rows (tta.jsonl) are the same path: as many rows, and equal
// steps, losses and accuracies, bit for bit. `plan`, if given, is b's plan in
// every row.
inline void expectSamePath(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                           const std::string& plan = "") {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["step"], b[i]["step"]);
    EXPECT_EQ(a[i]["loss"].get<double>(), b[i]["loss"].get<double>()) << "row " << i;
    EXPECT_EQ(a[i]["metrics"]["accuracy"].get<double>(), b[i]["metrics"]["accuracy"].get<double>()) << "row " << i;
    if (!plan.empty()) {
      EXPECT_EQ(b[i]["plan"], plan) << "row " << i;
    }
  }
}

}  // namespace gradzip::testing
