// Test helper for tests/trainer: the small deterministic training config the
// trainer and controller tests share (an MLP on Fashion-MNIST, one thread,
// constant learning rate), with the `compress:` section and further YAML
// (train, comm, ...) given by the test.
#pragma once

#include "trainer/TrainConfig.h"
#include "util/Yaml.h"

#include <string>

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

}  // namespace gradzip::testing
