// The training-progress file through which rank 0 of `gradzip train` tells an
// emulated launch (launch/EmulatedLaunch.h) how far training has got, so a
// rate schedule in epochs (comm/RateSchedule.h) can follow it. The launcher
// names the file in the ranks' environment (kProgressFileEnv); the file holds
// one line, the current fractional epoch as a decimal number ("1.25\n"). The
// writer writes <path>.tmp and renames it over <path>, so a reader sees either
// the previous value or the new one, never a torn line.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace gradzip::trainer {

// Set by the launcher for every rank when the network schedule is in epochs.
inline constexpr const char* kProgressFileEnv = "GRADZIP_PROGRESS_FILE";

// Writes `epoch` (finite, >= 0) to `path` atomically (tmp + rename). Throws
// UserError naming the path when it cannot write.
void writeProgressFile(const std::string& path, double epoch);

// The epoch in `path`, or nullopt when the file does not exist (yet) or does
// not hold exactly one finite number >= 0 (with optional trailing whitespace).
std::optional<double> readProgressFile(const std::string& path);

// How often rank 0 writes the progress file and the launcher reads it
// (launch/EmulatedLaunch.cpp): often enough that a rate schedule step lands
// within a fraction of a second (+ tc's own time) of its epoch, as the
// epoch-schedule tests of fast MLP steps need
// (experiments/results/network_emulation.md, "Progress interval"). A write is
// one small file and a rename.
inline constexpr std::chrono::milliseconds kProgressInterval{50};

// Throttled writer for the training loop: update() writes when at least
// `minInterval` has passed since the last write (the first call always
// writes); flush() writes the last value regardless. A writer for an empty
// path does nothing, so `ProgressFileWriter w(getenv(...) ?: "")` is the whole
// setup. Not thread-safe; one writer per file (rank 0).
class ProgressFileWriter {
 public:
  explicit ProgressFileWriter(std::string path, std::chrono::milliseconds minInterval = kProgressInterval);
  // The writer named by $GRADZIP_PROGRESS_FILE (empty = inactive).
  static ProgressFileWriter fromEnv();
  bool active() const { return !path_.empty(); }
  void update(double epoch);
  void flush();

 private:
  std::string path_;
  std::chrono::milliseconds minInterval_;
  std::optional<std::chrono::steady_clock::time_point> lastWrite_;
  double last_ = 0.0;
  bool pending_ = false;
};

}  // namespace gradzip::trainer
