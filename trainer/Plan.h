// A communication plan for one bucket: which compressor (with its options) and
// which collective. Plans are what the controller chooses and what GradSync
// runs; their key() names them in logs and TTA rows.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace gradzip::trainer {

struct Plan {
  std::string compressor = "fp16";
  YAML::Node options = YAML::Node(YAML::NodeType::Map);  // the compressor's options
  std::string collective = "engine";                       // engine | ring | tree | ps | allgather

  // "thc{bits: 4}@ps": compressor, options in flow style, collective.
  std::string key() const;
  bool operator==(const Plan& o) const { return key() == o.key(); }
};

}  // namespace gradzip::trainer
