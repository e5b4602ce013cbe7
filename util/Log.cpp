// Implements util/Log.h: a stderr spdlog sink whose pattern names the rank.
#include "util/Log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace gradzip {

void initLogging(int rank, int worldSize, const std::string& level) {
  spdlog::drop("gradzip");  // idempotent: tests and launch may call it twice
  auto logger = spdlog::stderr_color_mt("gradzip");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [rank {}/{}] [%^%l%$] %v", rank, worldSize));
  const char* env = std::getenv("GRADZIP_LOG_LEVEL");
  spdlog::set_level(spdlog::level::from_str(env ? env : level));
}

}  // namespace gradzip
