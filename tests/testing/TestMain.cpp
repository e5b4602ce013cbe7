// gtest main for every gradzip test executable: the environment that CLI tests
// need (GRADZIP_BINARY, GRADZIP_PYTHON), quiet logging and one intra-op
// thread (ctest runs tests in parallel on a 2-core machine; torch's thread pool
// on top of that makes the suite an order of magnitude slower), c10d's process
// settings (comm::configureProcessGroups), then RUN_ALL_TESTS.
#include "comm/ProcessGroupCommunicator.h"
#include "util/Log.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  // Tests that run the CLI or the venv's Python find them here (kept if set).
  setenv("GRADZIP_BINARY", GRADZIP_DEFAULT_BINARY, 0);
  setenv("GRADZIP_PYTHON", GRADZIP_DEFAULT_PYTHON, 0);
  setenv("GRADZIP_SOURCE_DIR", GRADZIP_DEFAULT_SOURCE_DIR, 0);
  gradzip::comm::configureProcessGroups();
  ::testing::InitGoogleTest(&argc, argv);
  gradzip::initLogging(0, 1, "warn");
  at::set_num_threads(1);
  return RUN_ALL_TESTS();
}
