// Implements compress/Factory.h: the table of known compressors.
#include "compress/Factory.h"

#include "util/Error.h"

#include <functional>
#include <map>

namespace gradzip::compress {
namespace {

// Builds a compressor from its options mapping; the bool says whether the
// scheme's paper applies error feedback (the default for `error_feedback`).
struct Entry {
  std::function<std::unique_ptr<Compressor>(YamlReader&)> make;
  bool paperUsesErrorFeedback;
};

const std::map<std::string, Entry>& registry() {
  static const std::map<std::string, Entry> table = {
      // -- fp32/fp16/bf16, TopK family, PowerSGD (compress helper 1) --
      // -- THC, natural compression, dithering, GradiVeQ (compress helper 2) --
  };
  return table;
}

}  // namespace

std::vector<std::string> compressorNames() {
  std::vector<std::string> out;
  for (const auto& [name, e] : registry()) out.push_back(name);
  return out;
}

std::unique_ptr<Compressor> makeCompressor(const std::string& name, YamlReader& options) {
  auto it = registry().find(name);
  if (it == registry().end())
    throw ConfigError(fmt::format("unknown compressor '{}' (known: {})", name, fmt::join(compressorNames(), ", ")));
  const bool ef = options.getBool("error_feedback", it->second.paperUsesErrorFeedback);
  auto c = it->second.make(options);
  options.finish();
  (void)ef;  // wrapped in ErrorFeedback once compress/ErrorFeedback.h lands
  return c;
}

std::unique_ptr<Compressor> makeCompressor(const std::string& name, const std::string& yamlOptions) {
  auto r = YamlReader::loadString(yamlOptions, "<" + name + " options>");
  return makeCompressor(name, r);
}

}  // namespace gradzip::compress
