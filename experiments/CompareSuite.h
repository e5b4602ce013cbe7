// The suite file of `gradzip compare` (format in experiments/Compare.h): the
// arms (a gradzip `compress` plan, passed through untouched, or a PyTorch DDP
// peer), the optional network sweep, repeats, and the base train config, parsed
// strictly (errors name file, line and key), with the FP16 and FP32 baselines
// added when the suite does not list them.
#pragma once

#include "util/Yaml.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::experiments {

// A gradzip arm trains with `compress` (passed through untouched, so whatever
// the trainer accepts, `{name: auto}` included, works here); a peer arm runs
// PyTorch DDP with a stock comm hook (experiments/python/ddp_peer.py).
struct Arm {
  std::string name;
  YAML::Node compress;
  std::string ddpHook;  // "" = gradzip arm; none | fp16 | powersgd
  int64_t powersgdRank = 4;
};

// One network of a sweep: its name (a directory) and `network:` block (null =
// the host network).
struct Network {
  std::string name;
  YAML::Node block;
};

struct Suite {
  std::string name;
  int worldSize = 2;
  std::vector<double> targets;
  std::string outDir = "runs";
  int repeats = 1;
  std::vector<Network> networks;  // empty = the base config's own network (or none)
  YAML::Node base;
  std::vector<Arm> arms;
};

// Parses and checks `path`; ConfigError naming file:line:key on bad input. The
// arms come back baselines first (fp16, fp32, unless listed), then in file order.
Suite loadSuite(const std::string& path);

}  // namespace gradzip::experiments
