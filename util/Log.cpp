// Implements util/Log.h: a stderr spdlog sink whose pattern names the rank and
// which keeps the status line below the log lines.
#include "util/Log.h"

#include "util/Error.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace gradzip {
namespace {

// Erases the status line before each log line and redraws it after, under the
// sink's lock, so a log line never lands in the middle of the status text.
class StatusLineSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  StatusLineSink() : inner_(std::make_shared<spdlog::sinks::stderr_color_sink_st>()) {}

  void setStatus(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = text;
    std::fputs("\r\033[K", stderr);
    std::fputs(status_.c_str(), stderr);
    std::fflush(stderr);
  }

  void keep() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!status_.empty()) std::fputs("\n", stderr);
    status_.clear();
    std::fflush(stderr);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!status_.empty()) std::fputs("\r\033[K", stderr);
    inner_->log(msg);
    if (!status_.empty()) std::fputs(status_.c_str(), stderr);
    std::fflush(stderr);
  }
  void flush_() override { inner_->flush(); }
  void set_pattern_(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter_(std::unique_ptr<spdlog::formatter> f) override { inner_->set_formatter(std::move(f)); }

 private:
  std::shared_ptr<spdlog::sinks::stderr_color_sink_st> inner_;
  std::string status_;
};

std::shared_ptr<StatusLineSink>& sink() {
  static std::shared_ptr<StatusLineSink> s;
  return s;
}

spdlog::level::level_enum parseLevel(const std::string& level, const std::string& source) {
  const auto& valid = logLevels();
  if (std::find(valid.begin(), valid.end(), level) == valid.end())
    throw UserError(fmt::format("{}: unknown log level '{}' (valid: {})", source, level, fmt::join(valid, ", ")));
  return spdlog::level::from_str(level);
}

}  // namespace

const std::vector<std::string>& logLevels() {
  static const std::vector<std::string> levels{"trace", "debug", "info", "warn", "error", "critical", "off"};
  return levels;
}

void initLogging(int rank, int worldSize, const std::string& level) {
  const char* env = std::getenv("GRADZIP_LOG_LEVEL");
  auto lvl = env && *env ? parseLevel(env, "GRADZIP_LOG_LEVEL") : parseLevel(level, "--log-level");
  if (rank > 0 && lvl == spdlog::level::info) lvl = spdlog::level::warn;
  spdlog::drop("gradzip");  // idempotent: tests and launch may call it twice
  sink() = std::make_shared<StatusLineSink>();
  auto logger = std::make_shared<spdlog::logger>("gradzip", sink());
  spdlog::register_logger(logger);
  spdlog::set_default_logger(logger);
  spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [rank {}/{}] [%^%l%$] %v", rank, worldSize));
  spdlog::set_level(lvl);
}

void setStatusLine(const std::string& text) {
  if (auto& s = sink()) {
    s->setStatus(text);
    return;
  }
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
}

void keepStatusLine() {
  if (auto& s = sink()) {
    s->keep();
    return;
  }
  std::fputs("\n", stderr);
}

}  // namespace gradzip
