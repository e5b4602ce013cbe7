// Test helper for the data tests: DataOptions parsed from YAML text, and the
// message of the ConfigError a text gets.
#pragma once

#include "data/DataOptions.h"
#include "util/Error.h"
#include "util/Yaml.h"

#include <string>

namespace gradzip::data::testing {

inline DataOptions parse(const std::string& yaml) {
  YamlReader r = YamlReader::loadString(yaml, "test.yaml");
  return DataOptions::fromYaml(r);
}

// parse(yaml)'s ConfigError message, or "<no error>".
inline std::string errorOf(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace gradzip::data::testing
