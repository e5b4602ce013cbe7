// Typed options of the optimizer and the learning-rate schedule (the `optim:`
// and `schedule:` sections of a run config), with YAML reading and writing.
#pragma once

#include "util/Yaml.h"

#include <string>

namespace gradzip::trainer {

struct OptimOptions {
  std::string name = "sgd";  // sgd | adamw
  double lr = 0.1;           // base learning rate (for world size 1 if scaled)
  double momentum = 0.9;     // sgd
  bool nesterov = false;     // sgd
  double weightDecay = 5e-4;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
  // "linear": lr x world size (Goyal et al. 2017); "sqrt": x sqrt(world size); "none".
  std::string scaleWithWorld = "none";

  static OptimOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& n) const;
};

struct ScheduleOptions {
  std::string name = "cosine";  // constant | step | cosine
  int64_t warmupSteps = 0;      // linear warm-up from 0 to the base lr
  double stepEpochs = 30;       // step: decay every this many epochs
  double gamma = 0.1;           // step: decay factor
  double minLr = 0.0;           // cosine: final lr

  static ScheduleOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& n) const;
};

}  // namespace gradzip::trainer
