// Implements the shaping side of comm/NetEmulator.h: tbf on both ends of every
// link through `tc` (or its removal for "unshaped"), and the background thread
// that follows a RateSchedule, at its times for one in seconds or by polling
// the training's progress for one in epochs.
#include "comm/NetEmulator.h"

#include "util/Error.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <exception>

namespace gradzip::comm {

namespace {

constexpr int64_t kMinBurstBytes = 4 * 1514;  // a few full frames, else tbf drops

}  // namespace

void NetEmulator::applyRate(std::optional<double> mbit) {
  // Both directions of every link: rank -> bridge on the rank's eth0, bridge ->
  // rank on the bridge's port.
  std::vector<std::pair<std::string, std::string>> devices;
  for (int r = 0; r < opts_.ranks; ++r) {
    devices.emplace_back(rankNs_[r], kRankInterface);
    devices.emplace_back(bridgeNs_, fmt::format("v{}", r));
  }
  if (!mbit) {
    if (shaped_)
      for (const auto& [ns, dev] : devices) run({"tc", "-n", ns, "qdisc", "del", "dev", dev, "root"});
    shaped_ = false;
    rate_ = std::nullopt;
    return;
  }
  GZ_CHECK(*mbit >= RateSchedule::kMinMbit && *mbit <= RateSchedule::kMaxMbit,
           "network emulation: rate {} Mbit/s is outside [{}, {}]", *mbit, RateSchedule::kMinMbit,
           RateSchedule::kMaxMbit);
  const double bitsPerSec = *mbit * 1e6;
  const int64_t burst =
      std::max<int64_t>(kMinBurstBytes, static_cast<int64_t>(std::llround(bitsPerSec / 8.0 * opts_.burstMillis / 1e3)));
  const std::string rate = fmt::format("{}bit", static_cast<int64_t>(std::llround(bitsPerSec)));
  const std::string latency = fmt::format("{}us", static_cast<int64_t>(std::llround(opts_.queueMillis * 1e3)));
  for (const auto& [ns, dev] : devices)
    run({"tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", std::to_string(burst),
         "latency", latency});
  shaped_ = true;
  rate_ = mbit;
}

void NetEmulator::setRate(std::optional<double> mbit) {
  stopSchedule();
  std::lock_guard<std::mutex> lock(rateMu_);
  applyRate(mbit);
  spdlog::info("network emulation {}: rate {}", prefix_, mbit ? fmt::format("{} Mbit/s", *mbit) : "unshaped");
}

void NetEmulator::startSchedule(const RateSchedule& s) {
  GZ_CHECK(!s.empty(), "network emulation: empty rate schedule");
  GZ_CHECK(!s.inEpochs(), "network emulation: the schedule {} is in epochs; it needs a progress source (followSchedule)",
           s.toString());
  stopSchedule();
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(rateMu_);
    applyRate(s.steps().front().mbit);
  }
  if (s.steps().size() > 1) {
    std::lock_guard<std::mutex> lock(threadMu_);
    stop_ = false;
    scheduleThread_ = std::thread([this, s, t0] { scheduleLoop(s, t0); });
  }
}

void NetEmulator::scheduleLoop(RateSchedule s, std::chrono::steady_clock::time_point t0) {
  for (size_t i = 1; i < s.steps().size(); ++i) {
    const auto& step = s.steps()[i];
    const auto at = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(step.start));
    {
      std::unique_lock<std::mutex> lock(threadMu_);
      if (stopCv_.wait_until(lock, at, [this] { return stop_; })) return;
    }
    std::lock_guard<std::mutex> lock(rateMu_);
    try {
      applyRate(step.mbit);
      spdlog::info("network emulation {}: t={} s rate {}", prefix_, step.start,
                   step.mbit ? fmt::format("{} Mbit/s", *step.mbit) : "unshaped");
    } catch (const std::exception& e) {
      scheduleError_ = e.what();
      spdlog::error("network emulation {}: schedule step at {} s failed: {}", prefix_, step.start, e.what());
    }
  }
}

void NetEmulator::followSchedule(const RateSchedule& s, ProgressFn progress, std::chrono::milliseconds poll) {
  GZ_CHECK(!s.empty(), "network emulation: empty rate schedule");
  GZ_CHECK(poll.count() > 0, "network emulation: poll interval must be positive");
  stopSchedule();
  {
    std::lock_guard<std::mutex> lock(rateMu_);
    applyRate(s.steps().front().mbit);
  }
  if (s.steps().size() > 1) {
    std::lock_guard<std::mutex> lock(threadMu_);
    stop_ = false;
    scheduleThread_ = std::thread([this, s, progress = std::move(progress), poll] { followLoop(s, progress, poll); });
  }
}

void NetEmulator::followLoop(RateSchedule s, ProgressFn progress, std::chrono::milliseconds poll) {
  // The rate the schedule last asked for; a failed change is not retried every
  // poll, only when the epoch moves to a step with another rate.
  std::optional<double> asked = s.steps().front().mbit;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(threadMu_);
      if (stopCv_.wait_for(lock, poll, [this] { return stop_; })) return;
    }
    const std::optional<double> epoch = progress();
    if (!epoch) continue;
    const std::optional<double> want = s.rateAt(*epoch);
    if (want == asked) continue;
    asked = want;
    std::lock_guard<std::mutex> lock(rateMu_);
    try {
      applyRate(want);
      spdlog::info("network emulation {}: epoch {:.3f} rate {}", prefix_, *epoch,
                   want ? fmt::format("{} Mbit/s", *want) : "unshaped");
    } catch (const std::exception& e) {
      scheduleError_ = e.what();
      spdlog::error("network emulation {}: schedule step at epoch {:.3f} failed: {}", prefix_, *epoch, e.what());
    }
  }
}

void NetEmulator::stopSchedule() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(threadMu_);
    stop_ = true;
    t = std::move(scheduleThread_);
  }
  stopCv_.notify_all();
  if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
  if (t.joinable()) t.detach();
}

std::optional<double> NetEmulator::currentRate() const {
  std::lock_guard<std::mutex> lock(rateMu_);
  return rate_;
}

std::string NetEmulator::lastScheduleError() const {
  std::lock_guard<std::mutex> lock(rateMu_);
  return scheduleError_;
}

}  // namespace gradzip::comm
