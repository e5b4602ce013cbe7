// Implements trainer/Progress.h.
#include "trainer/Progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>

namespace gradzip::trainer {

Progress::Progress(bool enabled, int64_t totalSteps)
    : enabled_(enabled), tty_(enabled && isatty(STDERR_FILENO)), total_(totalSteps) {}

void Progress::step(int64_t step, double loss, double samplesPerSecond) {
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - lastDraw_ < std::chrono::milliseconds(200) && step != total_) return;
  lastDraw_ = now;
  drawn_ = true;
  const int width = 30;
  const int filled = total_ > 0 ? int(width * step / total_) : 0;
  std::fprintf(stderr, "\r[%s%s] %lld/%lld loss %.4f %s %.0f samples/s   ", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), (long long)step, (long long)total_, loss,
               lastMetric_.c_str(), samplesPerSecond);
  std::fflush(stderr);
}

void Progress::evaluation(const TtaRow& row) {
  if (!enabled_) return;
  std::string m;
  for (const auto& [k, v] : row.metrics) m += fmt::format(" {} {:.4f}", k, v);
  lastMetric_ = m;
  if (tty_) std::fprintf(stderr, "\n");
  spdlog::info("step {} epoch {:.2f} train {:.1f}s loss {:.4f}{} | step {:.1f} ms (compute {:.1f}, exposed comm {:.1f})",
               row.step, row.epoch, row.trainSeconds, row.loss, m, row.breakdown.step * 1e3,
               row.breakdown.compute * 1e3, row.breakdown.exposed * 1e3);
}

void Progress::finish() {
  if (tty_ && drawn_) std::fprintf(stderr, "\n");
}

}  // namespace gradzip::trainer
