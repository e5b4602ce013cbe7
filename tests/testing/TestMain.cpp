// gtest main for every gradzip test executable: quiet logging and one intra-op
// thread (ctest runs tests in parallel on a 2-core machine; torch's thread pool
// on top of that makes the suite an order of magnitude slower), then RUN_ALL_TESTS.
#include "util/Log.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  gradzip::initLogging(0, 1, "warn");
  at::set_num_threads(1);
  return RUN_ALL_TESTS();
}
