// The one explicit compressor factory (STYLE.md §4): maps a name and its YAML
// options to a constructed Compressor, wrapped in ErrorFeedback where the
// scheme's paper uses it (overridable with `error_feedback: true|false`).
// Unknown names fail with the list of known ones.
#pragma once

#include "compress/Compressor.h"
#include "util/Yaml.h"

#include <memory>
#include <string>
#include <vector>

namespace gradzip::compress {

// `options` is the mapping of this compressor's options (may be empty); it is
// finish()ed here, so unknown keys are reported with file and line.
std::unique_ptr<Compressor> makeCompressor(const std::string& name, YamlReader& options);
// Convenience for code and tests: options given as YAML text, e.g. "{bits: 4}".
std::unique_ptr<Compressor> makeCompressor(const std::string& name, const std::string& yamlOptions = "{}");
std::vector<std::string> compressorNames();
// Whether makeCompressor(name, options) wraps the compressor in ErrorFeedback:
// the `error_feedback` option where given, else whether the scheme's paper
// uses it. Throws ConfigError on an unknown name or a non-boolean option.
bool usesErrorFeedback(const std::string& name, const YAML::Node& options);
// Whether the scheme aggregates by all-gather under every collective it
// accepts (TopK: its "engine" is c10d's all-gather), so that its wire cost is
// the all-gather's whatever the plan's collective is called. Throws
// ConfigError on an unknown name.
bool aggregatesByAllGather(const std::string& name);

}  // namespace gradzip::compress
