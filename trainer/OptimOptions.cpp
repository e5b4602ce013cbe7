// Implements trainer/OptimOptions.h.
#include "trainer/OptimOptions.h"

namespace gradzip::trainer {

OptimOptions OptimOptions::fromYaml(YamlReader& r) {
  OptimOptions o;
  o.name = r.getEnum("name", o.name, {"sgd", "adamw"});
  o.lr = r.getDouble("lr", o.lr, 0.0, 100.0);
  o.weightDecay = r.getDouble("weight_decay", o.weightDecay, 0.0, 1.0);
  if (o.name == "sgd") {
    o.momentum = r.getDouble("momentum", o.momentum, 0.0, 1.0);
    o.nesterov = r.getBool("nesterov", o.nesterov);
    if (o.nesterov && o.momentum <= 0) r.fail("nesterov", "Nesterov momentum needs momentum > 0");
  } else {
    o.momentum = 0;
    o.beta1 = r.getDouble("beta1", o.beta1, 0.0, 0.999999);
    o.beta2 = r.getDouble("beta2", o.beta2, 0.0, 0.999999);
    o.eps = r.getDouble("eps", o.eps, 1e-12, 1.0);
  }
  o.scaleWithWorld = r.getEnum("scale_lr_with_world", o.scaleWithWorld, {"none", "linear", "sqrt"});
  r.finish();
  return o;
}

void OptimOptions::toYaml(YAML::Node& n) const {
  n["name"] = name;
  n["lr"] = lr;
  n["weight_decay"] = weightDecay;
  if (name == "sgd") {
    n["momentum"] = momentum;
    n["nesterov"] = nesterov;
  } else {
    n["beta1"] = beta1;
    n["beta2"] = beta2;
    n["eps"] = eps;
  }
  n["scale_lr_with_world"] = scaleWithWorld;
}

ScheduleOptions ScheduleOptions::fromYaml(YamlReader& r) {
  ScheduleOptions o;
  o.name = r.getEnum("name", o.name, {"constant", "step", "cosine"});
  o.warmupSteps = r.getInt("warmup_steps", o.warmupSteps, 0);
  if (o.name == "step") {
    o.stepEpochs = r.getDouble("step_epochs", o.stepEpochs, 1e-6);
    o.gamma = r.getDouble("gamma", o.gamma, 0.0, 1.0);
  }
  if (o.name == "cosine") o.minLr = r.getDouble("min_lr", o.minLr, 0.0);
  r.finish();
  return o;
}

void ScheduleOptions::toYaml(YAML::Node& n) const {
  n["name"] = name;
  n["warmup_steps"] = warmupSteps;
  if (name == "step") {
    n["step_epochs"] = stepEpochs;
    n["gamma"] = gamma;
  }
  if (name == "cosine") n["min_lr"] = minLr;
}

}  // namespace gradzip::trainer
