// Fuzz target for the YAML run configuration: util/Yaml (YamlReader) under the
// whole strict schema of trainer/TrainConfig, as `gradzip train CONFIG --set
// k=v` reads it. The input is the config file's text; leading lines of the form
// "--set key.path=value" are taken off and passed as overrides instead. A bad
// config must be refused with a ConfigError/UserError naming the file (or the
// --set override); a config that loads must also survive toYaml(), the
// fingerprint and a reload of its own effective config (what every run writes to
// runs/<name>/config.yaml).
#include "tests/fuzz/FuzzSupport.h"
#include "trainer/TrainConfig.h"
#include "util/Log.h"

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gradzip::initLogging(0, 1, "off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gradzip;
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  static const std::string kSet = "--set ";
  while (text.compare(0, kSet.size(), kSet) == 0) {
    size_t eol = text.find('\n');
    overrides.push_back(text.substr(kSet.size(), eol == std::string::npos ? std::string::npos : eol - kSet.size()));
    text.erase(0, eol == std::string::npos ? text.size() : eol + 1);
  }
  const std::string path = fuzz::scratchDir() + "/config.yaml";
  fuzz::writeFile(path, text);

  std::string effective;
  bool loaded = false;
  fuzz::expectOnlyUserErrors({path, "--set "}, [&] {
    auto cfg = trainer::TrainConfig::load(path, overrides);
    loaded = true;
    (void)cfg.fingerprint();
    YAML::Emitter e;
    e << cfg.toYaml();
    effective = e.c_str();
  });
  if (!loaded) return 0;
  // The effective config of a run that started must load again unchanged.
  try {
    auto again = YamlReader::loadString(effective, "effective.yaml");
    auto cfg2 = trainer::TrainConfig::fromYaml(again);
    YAML::Emitter e2;
    e2 << cfg2.toYaml();
    if (effective != e2.c_str())
      fuzz::fail("the effective config changes when reloaded:\n" + effective + "\n---- became ----\n" + e2.c_str());
  } catch (const std::exception& e) {
    fuzz::fail(std::string("the effective config does not load again: ") + e.what() + "\n" + effective);
  }
  return 0;
}
