// Implements controller/Candidates.h.
#include "controller/Candidates.h"

#include "compress/Factory.h"
#include "util/Error.h"

#include <fmt/format.h>

#include <algorithm>

namespace gradzip::trainer {
namespace {

// The option sets of one family (flow-style YAML mappings).
std::vector<std::string> optionGrid(const std::string& family, const ControllerOptions& o) {
  std::vector<std::string> grid;
  if (family == "topk") {
    for (double c : o.ratios) grid.push_back(fmt::format("{{ratio: {}}}", c));
  } else if (family == "artopk") {
    for (double c : o.ratios)
      for (const char* mode : {"star", "var"}) grid.push_back(fmt::format("{{cr: {}, mode: {}}}", c, mode));
  } else if (family == "topkc") {
    for (double b : o.topkcBits) grid.push_back(fmt::format("{{bits: {}}}", b));
  } else if (family == "thc") {
    for (auto b : o.thcBits) grid.push_back(fmt::format("{{deployment: ps, bits: {}}}", b));
    // The all-reduce form with partial rotation (end-to-end utility §3.2.2).
    for (auto b : o.thcAllReduceBits)
      grid.push_back(fmt::format("{{deployment: allreduce, bits: {}, rotation_block_log2: 10}}", b));
  } else if (family == "powersgd") {
    for (auto k : o.powersgdRanks) grid.push_back(fmt::format("{{rank: {}}}", k));
  } else {
    grid.push_back("{}");
  }
  return grid;
}

}  // namespace

std::vector<Candidate> makeCandidates(const ControllerOptions& o) {
  std::vector<Candidate> out;
  for (const auto& family : o.families) {
    for (const auto& text : optionGrid(family, o)) {
      std::unique_ptr<compress::Compressor> c;
      try {
        c = compress::makeCompressor(family, text);
      } catch (const UserError&) {
        continue;  // a combination the compressor rejects
      }
      for (const auto& coll : c->capabilities().collectives) {
        if (!o.collectives.empty() && std::find(o.collectives.begin(), o.collectives.end(), coll) == o.collectives.end())
          continue;
        Candidate cand;
        cand.family = family;
        cand.plan.compressor = family;
        cand.plan.collective = coll;
        cand.plan.options = YAML::Load(text);
        out.push_back(std::move(cand));
      }
    }
  }
  GZ_CHECK(!out.empty(), "compress: auto: no candidate plan is left (families {}, collectives {})",
           fmt::join(o.families, ", "), o.collectives.empty() ? "any" : fmt::format("{}", fmt::join(o.collectives, ", ")));
  return out;
}

Plan planFromKey(const std::string& key) {
  const auto at = key.rfind('@');
  GZ_CHECK(at != std::string::npos && at > 0, "malformed plan '{}' (expected name{{options}}@collective)", key);
  Plan p;
  p.collective = key.substr(at + 1);
  const std::string head = key.substr(0, at);
  const auto brace = head.find('{');
  p.compressor = head.substr(0, brace);
  if (brace != std::string::npos) {
    try {
      p.options = YAML::Load(head.substr(brace));
    } catch (const YAML::Exception& e) {
      throw UserError(fmt::format("malformed plan '{}': {}", key, e.what()));
    }
  }
  return p;
}

}  // namespace gradzip::trainer
