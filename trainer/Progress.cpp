// Implements trainer/Progress.h.
#include "trainer/Progress.h"

#include "util/Log.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <vector>

namespace gradzip::trainer {

Progress::Progress(bool enabled, int64_t totalSteps, int64_t stepsPerEpoch, bool tty)
    : enabled_(enabled), tty_(enabled && tty), total_(totalSteps), perEpoch_(std::max<int64_t>(1, stepsPerEpoch)) {}

std::string Progress::duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<int64_t>(std::llround(s));
  if (t >= 3600) return fmt::format("{}h{:02d}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string Progress::line(int64_t step, double loss, double samplesPerSecond, int64_t skippedSteps) const {
  std::string eta = "?";
  if (firstStep_ >= 0 && step > firstStep_) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - firstTime_).count();
    eta = duration(double(total_ - step) * elapsed / double(step - firstStep_));
  }
  const int pct = total_ > 0 ? int(100 * step / total_) : 0;
  return fmt::format("step {}/{} ({}%) epoch {:.2f} loss {:.4f}{} | {:.0f} samples/s | ETA {}{}", step, total_, pct,
                     double(step) / double(perEpoch_), loss, lastMetric_, samplesPerSecond, eta,
                     skippedSteps > 0 ? fmt::format(" | {} steps skipped", skippedSteps) : "");
}

void Progress::step(int64_t step, double loss, double samplesPerSecond, int64_t skippedSteps) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (firstStep_ < 0) {
    firstStep_ = step - 1;
    firstTime_ = now;
    lastDraw_ = now;
  }
  if (tty_) {
    if (drawn_ && now - lastDraw_ < std::chrono::milliseconds(200) && step != total_) return;
    lastDraw_ = now;
    drawn_ = true;
    setStatusLine(line(step, loss, samplesPerSecond, skippedSteps));
    return;
  }
  if (now - lastDraw_ < kPlainInterval) return;
  lastDraw_ = now;
  spdlog::info("progress: {}", line(step, loss, samplesPerSecond, skippedSteps));
}

void Progress::evaluation(const TtaRow& row) {
  if (!enabled_) return;
  std::string m;
  for (const auto& [k, v] : row.metrics) m += fmt::format(" {} {:.4f}", k, v);
  lastMetric_ = m;
  std::vector<std::string> notes;
  if (row.nonFiniteLosses > 0) notes.push_back(fmt::format("{} non-finite", row.nonFiniteLosses));
  if (row.skippedSteps > 0) notes.push_back(fmt::format("{} steps skipped", row.skippedSteps));
  const std::string skipped = notes.empty() ? "" : fmt::format(" ({})", fmt::join(notes, ", "));
  spdlog::info("step {} epoch {:.2f} train {:.1f}s loss {:.4f}{}{} | step {:.1f} ms (compute {:.1f}, exposed comm "
               "{:.1f})",
               row.step, row.epoch, row.trainSeconds, row.loss, skipped, m, row.breakdown.step * 1e3,
               row.breakdown.compute * 1e3, row.breakdown.exposed * 1e3);
}

void Progress::finish() {
  if (tty_ && drawn_) keepStatusLine();
}

}  // namespace gradzip::trainer
