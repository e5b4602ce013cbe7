// Entry points of the CLI subcommands that do real work (cli/main.cpp only
// parses arguments and maps errors to exit codes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::trainer {

struct TrainArgs {
  std::string config;
  bool resume = false;
  // Replace an earlier run's results in the run directory (without it, and
  // without resume, an existing run directory is an error).
  bool overwrite = false;
  std::vector<std::string> overrides;  // "dotted.key=value"
};
int trainCommand(const TrainArgs& args);

}  // namespace gradzip::trainer
