// Implements launch/ProgressFile.h: atomic write (tmp + rename) and tolerant
// read of the one-line epoch file.
#include "launch/ProgressFile.h"

#include "util/Error.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gradzip::trainer {

void writeProgressFile(const std::string& path, double epoch) {
  GZ_CHECK(std::isfinite(epoch) && epoch >= 0, "progress file {}: epoch {} is not a finite number >= 0", path, epoch);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    // Six decimals: an epoch of a million steps still moves visibly per step.
    out << fmt::format("{:.6f}\n", epoch);
    out.flush();
    GZ_CHECK(out.good(), "progress file {}: cannot write {}: {}", path, tmp, std::strerror(errno));
  }
  GZ_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "progress file {}: cannot rename {} over it: {}", path, tmp,
           std::strerror(errno));
}

std::optional<double> readProgressFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  if (end == begin || errno == ERANGE) return std::nullopt;
  for (const char* p = end; *p; ++p)
    if (*p != '\n' && *p != ' ' && *p != '\t' && *p != '\r') return std::nullopt;
  if (!std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

ProgressFileWriter::ProgressFileWriter(std::string path, std::chrono::milliseconds minInterval)
    : path_(std::move(path)), minInterval_(minInterval) {}

ProgressFileWriter ProgressFileWriter::fromEnv() {
  const char* p = std::getenv(kProgressFileEnv);
  return ProgressFileWriter(p ? p : "");
}

void ProgressFileWriter::update(double epoch) {
  if (!active()) return;
  last_ = epoch;
  pending_ = true;
  const auto now = std::chrono::steady_clock::now();
  if (lastWrite_ && now - *lastWrite_ < minInterval_) return;
  lastWrite_ = now;
  flush();
}

void ProgressFileWriter::flush() {
  if (!active() || !pending_) return;
  writeProgressFile(path_, last_);
  pending_ = false;
}

}  // namespace gradzip::trainer
