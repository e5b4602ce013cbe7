// A communication plan for one bucket: which compressor (with its options) and
// which collective. Plans are what the controller chooses and what GradSync
// runs; their key() names them in logs and TTA rows.
#pragma once

#include "util/Yaml.h"

#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>

namespace gradzip::compress {
class Compressor;
}

namespace gradzip::trainer {

struct Plan {
  std::string compressor = "fp16";
  YAML::Node options = YAML::Node(YAML::NodeType::Map);  // the compressor's options
  std::string collective = "engine";                       // engine | ring | tree | ps | allgather

  // Copies own their options: assigning one YAML::Node to another rebinds the
  // shared node in place, which would change every plan holding it.
  Plan() = default;
  Plan(const Plan& o) : compressor(o.compressor), options(YAML::Clone(o.options)), collective(o.collective) {}
  Plan& operator=(const Plan& o) {
    if (this != &o) {
      compressor = o.compressor;
      options.reset(YAML::Clone(o.options));
      collective = o.collective;
    }
    return *this;
  }

  // "thc{bits: 4}@ps": compressor, options in flow style, collective.
  std::string key() const;
  // "thc{bits: 4}": the key without the collective. A compressor
  // configuration's collectives share its encode/decode and statistics.
  std::string codecKey() const;
  bool operator==(const Plan& o) const { return key() == o.key(); }
  // Whether the compressor runs under error feedback (compress/Factory.h
  // usesErrorFeedback: its `error_feedback` option, else its paper's choice).
  bool errorFeedback() const;
  // A fresh compressor of this plan (its options validated when the plan was built).
  std::unique_ptr<compress::Compressor> makeCompressor() const;

  // `{name: thc, collective: ps, thc: {bits: 4}}` (the `compress:` mapping of a
  // train config). The options are validated by building the compressor once,
  // so errors carry file:line like every other config error; so is a
  // collective the compressor does not support.
  static Plan fromYaml(YamlReader r);
  // The mapping fromYaml reads.
  YAML::Node toYaml() const;
};

}  // namespace gradzip::trainer
