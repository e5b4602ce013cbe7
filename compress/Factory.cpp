// Implements compress/Factory.h: the table of known compressors.
#include "compress/Factory.h"

#include "compress/ArTopK.h"
#include "compress/ErrorFeedback.h"
#include "compress/FloatCast.h"
#include "compress/GradiVeQ.h"
#include "compress/NaturalCompression.h"
#include "compress/NaturalDithering.h"
#include "compress/Qsgd.h"
#include "compress/Thc.h"
#include "compress/PowerSgd.h"
#include "compress/TopK.h"
#include "compress/TopKC.h"
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
  bool allGatherOnly = false;  // aggregatesByAllGather
  // collectiveRounds from the options; none: 1.
  std::function<int(const YAML::Node&)> rounds = nullptr;
};

int two(const YAML::Node&) { return 2; }

// THC: the range round (Alg. 3's max of norms), then the codes; the
// all-reduce deployment adds the all-reduce of its saturation count.
int thcRounds(const YAML::Node& options) {
  std::string deployment = ThcOptions{}.deployment;
  if (options.IsMap() && options["deployment"]) {
    try {
      deployment = options["deployment"].as<std::string>();
    } catch (const YAML::Exception&) {
      throw ConfigError("thc: deployment must be a string (ps or allreduce)");
    }
  }
  return deployment == "allreduce" ? 3 : 2;
}

const std::map<std::string, Entry>& registry() {
  static const std::map<std::string, Entry> table = {
      // -- fp32/fp16/bf16, TopK family, PowerSGD (compress helper 1) --
      {"fp32", {[](YamlReader&) -> std::unique_ptr<Compressor> { return std::make_unique<FloatCast>(at::kFloat); }, false}},
      {"fp16", {[](YamlReader&) -> std::unique_ptr<Compressor> { return std::make_unique<FloatCast>(at::kHalf); }, false}},
      {"bf16", {[](YamlReader&) -> std::unique_ptr<Compressor> { return std::make_unique<FloatCast>(at::kBFloat16); }, false}},
      {"topk", {[](YamlReader& r) -> std::unique_ptr<Compressor> { return std::make_unique<TopK>(TopKOptions::fromYaml(r)); }, true, true}},
      {"topkc", {[](YamlReader& r) -> std::unique_ptr<Compressor> { return std::make_unique<TopKC>(TopKCOptions::fromYaml(r)); }, true, false, two}},
      {"artopk", {[](YamlReader& r) -> std::unique_ptr<Compressor> { return std::make_unique<ArTopK>(ArTopKOptions::fromYaml(r)); }, true}},
      {"powersgd", {[](YamlReader& r) -> std::unique_ptr<Compressor> { return std::make_unique<PowerSgd>(PowerSgdOptions::fromYaml(r)); }, true, false, two}},
      // -- THC, natural compression, dithering, GradiVeQ (compress helper 2) --
      {"thc", {[](YamlReader& r) -> std::unique_ptr<Compressor> { return std::make_unique<Thc>(ThcOptions::fromYaml(r)); }, true, false, thcRounds}},
      {"cnat", {[](YamlReader& r) -> std::unique_ptr<Compressor> { return std::make_unique<NaturalCompression>(NaturalCompressionOptions::fromYaml(r)); }, false}},
      {"dnat", {[](YamlReader& r) -> std::unique_ptr<Compressor> { return std::make_unique<NaturalDithering>(NaturalDitheringOptions::fromYaml(r)); }, false}},
      {"qsgd", {[](YamlReader& r) -> std::unique_ptr<Compressor> { return std::make_unique<Qsgd>(QsgdOptions::fromYaml(r)); }, false}},
      {"gradiveq", {[](YamlReader& r) -> std::unique_ptr<Compressor> { return std::make_unique<GradiVeQ>(GradiVeQOptions::fromYaml(r)); }, false}},
  };
  return table;
}

const Entry& entry(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end())
    throw ConfigError(fmt::format("unknown compressor '{}' (known: {})", name, fmt::join(compressorNames(), ", ")));
  return it->second;
}

}  // namespace

std::vector<std::string> compressorNames() {
  std::vector<std::string> out;
  for (const auto& [name, e] : registry()) out.push_back(name);
  return out;
}

bool aggregatesByAllGather(const std::string& name) { return entry(name).allGatherOnly; }

int collectiveRounds(const std::string& name, const YAML::Node& options) {
  const Entry& e = entry(name);
  return e.rounds ? e.rounds(options) : 1;
}

bool usesErrorFeedback(const std::string& name, const YAML::Node& options) {
  const bool byPaper = entry(name).paperUsesErrorFeedback;
  if (!options.IsMap() || !options["error_feedback"]) return byPaper;
  try {
    return options["error_feedback"].as<bool>();
  } catch (const YAML::Exception&) {
    throw ConfigError(fmt::format("{}: error_feedback must be true or false", name));
  }
}

std::unique_ptr<Compressor> makeCompressor(const std::string& name, YamlReader& options) {
  const Entry& e = entry(name);
  const bool ef = options.getBool("error_feedback", e.paperUsesErrorFeedback);
  const CodecPath path = parseCodecPath(
      options.getEnum("codec", toString(defaultCodecPath()), codecPathNames()), name + ".codec");
  auto c = e.make(options);
  options.finish();
  if (ef) c = std::make_unique<ErrorFeedback>(std::move(c));
  c->setCodecPath(path);
  return c;
}

std::unique_ptr<Compressor> makeCompressor(const std::string& name, const std::string& yamlOptions) {
  auto r = YamlReader::loadString(yamlOptions, "<" + name + " options>");
  return makeCompressor(name, r);
}

}  // namespace gradzip::compress
