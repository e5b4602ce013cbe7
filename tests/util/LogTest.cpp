// Tests of util/Log.h: a log level that is not one of the valid ones is an
// error naming the value, where it came from and the valid levels (spdlog
// would turn it into "off" silently), and ranks above 0 log info at warn.
#include "tests/testing/UserErrorOf.h"
#include "util/Log.h"

#include "util/Error.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

using namespace gradzip;
using gradzip::testing::userErrorOf;

TEST(Log, UnknownLevelIsAnErrorListingTheValidOnes) {
  unsetenv("GRADZIP_LOG_LEVEL");
  EXPECT_EQ(userErrorOf([] { initLogging(0, 1, "bogus"); }),
            "--log-level: unknown log level 'bogus' (valid: trace, debug, info, warn, error, critical, off)");
  setenv("GRADZIP_LOG_LEVEL", "loud", 1);
  EXPECT_NE(userErrorOf([] { initLogging(0, 1, "info"); }).find("GRADZIP_LOG_LEVEL: unknown log level 'loud'"),
            std::string::npos);
  unsetenv("GRADZIP_LOG_LEVEL");
  initLogging(0, 1, "warn");  // what TestMain installs
}

TEST(Log, RanksAboveZeroLogInfoAtWarn) {
  unsetenv("GRADZIP_LOG_LEVEL");
  initLogging(1, 2, "info");
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
  initLogging(1, 2, "debug");
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
  initLogging(0, 2, "info");
  EXPECT_EQ(spdlog::get_level(), spdlog::level::info);
  initLogging(0, 1, "warn");
}
