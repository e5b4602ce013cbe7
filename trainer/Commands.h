// Entry points of the CLI subcommands that do real work (trainer/main.cpp only
// parses arguments and maps errors to exit codes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::trainer {

struct TrainArgs {
  std::string config;
  bool resume = false;
  std::vector<std::string> overrides;  // "dotted.key=value"
};
int trainCommand(const TrainArgs& args);

}  // namespace gradzip::trainer
