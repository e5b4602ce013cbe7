// Implements controller/DecisionLog.h.
#include "controller/DecisionLog.h"

#include "util/Error.h"
#include "util/RunLogs.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <tuple>

namespace gradzip::trainer {

DecisionLog::DecisionLog(std::string runDir, int rank) : runDir_(std::move(runDir)), rank_(rank) {
  const std::string dir = fmt::format("{}/rank{}", runDir_, rank_);
  std::filesystem::create_directories(dir);
  // What the logs held before this process (a resumed run's earlier part):
  // resumed() drops what start() wrote since, which repeats it.
  for (auto [log, name, size] : {std::tuple{&planLog_, "plans", &planLogBytes_},
                                 std::tuple{&undoneLog_, "undone", &undoneLogBytes_}}) {
    const std::string path = fmt::format("{}/{}.jsonl", dir, name);
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    *size = ec ? 0 : bytes;
    log->open(path, std::ios::app);
    GZ_CHECK(log->good(), "cannot write {}", path);
  }
}

void DecisionLog::write(const nlohmann::json& rec) {
  if (rank_ != 0) return;
  std::ofstream f(runDir_ + "/decisions.jsonl", std::ios::app);
  f << rec.dump() << "\n";
  GZ_CHECK(f.good(), "cannot append to {}/decisions.jsonl", runDir_);
}

void DecisionLog::plan(int64_t step, const std::string& plan, double bits) {
  planLog_ << nlohmann::json{{"step", step}, {"plan", plan}, {"bits", bits}}.dump() << "\n";
  planLog_.flush();
}

void DecisionLog::undone(int64_t step, const std::string& plan, int64_t steps, const char* by) {
  if (steps <= 0) return;
  undoneLog_ << nlohmann::json{{"step", step}, {"plan", plan}, {"steps", steps}, {"by", by}}.dump() << "\n";
  undoneLog_.flush();
}

void DecisionLog::resumed(int64_t step, const std::string& plan) {
  for (auto [log, name, size] : {std::tuple{&planLog_, "plans", planLogBytes_},
                                 std::tuple{&undoneLog_, "undone", undoneLogBytes_}}) {
    const std::string path = fmt::format("{}/rank{}/{}.jsonl", runDir_, rank_, name);
    log->close();
    // start()'s records (the start's plan at step 0, again) are the earlier
    // part's; the plan the checkpoint restores has its record there too.
    std::filesystem::resize_file(path, size);
    keepJsonLinesThrough(path, step);
    log->open(path, std::ios::app);
    GZ_CHECK(log->good(), "cannot write {}", path);
  }
  if (rank_ != 0) return;
  keepJsonLinesThrough(runDir_ + "/decisions.jsonl", step);
  write(nlohmann::json{{"step", step}, {"event", "resume"}, {"plan", plan}});
}

}  // namespace gradzip::trainer
