// Implements util/RunLogs.h with nlohmann-json for the JSON lines.
#include "util/RunLogs.h"

#include "util/Error.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <vector>

namespace gradzip {

void keepLines(const std::string& path, const std::function<bool(const std::string&)>& keep) {
  std::ifstream in(path);
  if (!in) return;
  std::vector<std::string> kept;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && keep(line)) kept.push_back(line);
  in.close();
  std::ofstream out(path, std::ios::trunc);
  for (auto& l : kept) out << l << '\n';
  GZ_CHECK(out.good(), "cannot rewrite {}", path);
}

int64_t jsonLineStep(const std::string& line) {
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return -1;
  for (const char* field : {"step", "decision_step"})
    if (j.contains(field)) return j[field].is_number_integer() ? j[field].get<int64_t>() : -1;
  return -1;
}

void keepJsonLinesThrough(const std::string& path, int64_t step) {
  keepLines(path, [step](const std::string& line) {
    const int64_t s = jsonLineStep(line);
    return s >= 0 && s <= step;
  });
}

}  // namespace gradzip
