// gtest main for every gradzip test executable: quiet logging, then RUN_ALL_TESTS.
#include "util/Log.h"

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  gradzip::initLogging(0, 1, "warn");
  return RUN_ALL_TESTS();
}
