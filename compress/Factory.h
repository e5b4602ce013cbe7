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
// How many dependent rounds of collectives one aggregation of the scheme
// with these options makes, each paying a collective's latency: 2 where the
// ranks first agree on side information (TopKC's chunk norms, PowerSGD's P
// before Q, THC's ranges), 3 for THC's all-reduce deployment (its saturation
// count after the codes), else 1. The controller's cost model charges each
// one; a test counts them in what the code issues
// (PlanCost.LatencyTermsAreTheRoundsTheCodeRuns). Throws ConfigError on an
// unknown name.
int collectiveRounds(const std::string& name, const YAML::Node& options);

}  // namespace gradzip::compress
