// Logging setup for gradzip executables: spdlog with the rank in every line.
// Library code logs through spdlog's default logger ({} placeholders) and never
// writes to std::cout; the application calls initLogging once per process.
// On a terminal, one status line (the training progress) can stay at the
// bottom: log lines are printed above it and it is redrawn after each.
#pragma once

#include <string>
#include <vector>

namespace gradzip {

// The levels initLogging accepts, most verbose first.
const std::vector<std::string>& logLevels();

// Installs a stderr logger whose pattern carries "[rank R/N]". level is one of
// logLevels() (GRADZIP_LOG_LEVEL overrides it); anything else throws UserError
// naming the value, where it came from and the valid levels. Ranks above 0
// log at warn when the level is info, so N ranks on one terminal do not each
// repeat rank 0's start-up lines; debug and trace apply to every rank.
void initLogging(int rank, int worldSize, const std::string& level = "info");

// Shows `text` as the status line, replacing the previous one (stderr must be
// a terminal: the caller checks). Empty text removes it.
void setStatusLine(const std::string& text);
// Ends the status line: it stays on screen as a plain line and later log
// lines go below it.
void keepStatusLine();

}  // namespace gradzip
