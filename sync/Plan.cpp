// Implements sync/Plan.h.
#include "sync/Plan.h"

#include "compress/Factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gradzip::trainer {

bool Plan::errorFeedback() const { return compress::usesErrorFeedback(compressor, options); }

namespace {
// A parsed node keeps its source style, which the emitter honours over
// YAML::Flow: options written as a block in the config would otherwise give
// a multi-line key, unequal to the same options written inline.
void setFlow(YAML::Node n) {
  n.SetStyle(YAML::EmitterStyle::Flow);
  if (n.IsMap())
    for (auto kv : n) setFlow(kv.second);
  else if (n.IsSequence())
    for (auto v : n) setFlow(v);
}
}  // namespace

std::string Plan::codecKey() const {
  if (!options || !options.IsMap() || options.size() == 0) return compressor;
  YAML::Node flow = YAML::Clone(options);
  setFlow(flow);
  YAML::Emitter e;
  e << flow;
  return compressor + e.c_str();
}

std::string Plan::key() const { return codecKey() + "@" + collective; }

Plan Plan::fromYaml(YamlReader r) {
  Plan p;
  p.compressor = r.getEnum("name", p.compressor, compress::compressorNames());
  p.collective = r.getEnum("collective", p.collective, {"engine", "ring", "tree", "ps", "allgather"});
  auto opts = r.child(p.compressor);
  auto node = r.raw(p.compressor);
  p.options = node.IsDefined() && !node.IsNull() ? YAML::Clone(node) : YAML::Node(YAML::NodeType::Map);
  // A compressor's own checks of its options (e.g. THC's g >= 2^b - 1) name
  // the config file, line and key like every other config error.
  std::unique_ptr<compress::Compressor> c;
  try {
    c = compress::makeCompressor(p.compressor, opts);
  } catch (const ConfigError&) {
    throw;
  } catch (const UserError& e) {
    r.fail(p.compressor, e.what());
  }
  const auto caps = c->capabilities();
  if (std::find(caps.collectives.begin(), caps.collectives.end(), p.collective) == caps.collectives.end())
    r.fail("collective", fmt::format("compressor {} does not support collective '{}' (supported: {})", p.compressor,
                                     p.collective, fmt::join(caps.collectives, ", ")));
  r.finish();
  return p;
}

std::unique_ptr<compress::Compressor> Plan::makeCompressor() const {
  YamlReader r(options, "<plan " + key() + ">", "compress." + compressor);
  return compress::makeCompressor(compressor, r);
}

YAML::Node Plan::toYaml() const {
  YAML::Node n;
  n["name"] = compressor;
  n["collective"] = collective;
  if (options && options.size() > 0) n[compressor] = YAML::Clone(options);
  return n;
}

}  // namespace gradzip::trainer
