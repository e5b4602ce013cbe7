// Logging setup for gradzip executables: spdlog with the rank in every line.
// Library code logs through spdlog's default logger ({} placeholders) and never
// writes to std::cout; the application calls initLogging once per process.
#pragma once

#include <string>

namespace gradzip {

// Installs a stderr logger whose pattern carries "[rank R/N]". level is one of
// trace, debug, info, warn, error, off (GRADZIP_LOG_LEVEL overrides it).
void initLogging(int rank, int worldSize, const std::string& level = "info");

}  // namespace gradzip
