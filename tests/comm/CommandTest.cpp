// Tests of comm/Command.h, the subprocess runner behind the network emulator
// (ip, tc): output captured, a failure names the command and its stderr, a
// missing program exits 127, and a timeout kills the child.
#include "comm/Command.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace gradzip::comm {
namespace {

TEST(Command, FailureNamesCommandAndStderr) {
  EXPECT_EQ(runChecked({"echo", "a b"}), "a b\n");
  try {
    runChecked({"ls", "/nonexistent-gradzip-path"});
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ls /nonexistent-gradzip-path"), std::string::npos) << m;
    EXPECT_NE(m.find("No such file"), std::string::npos) << m;
  }
  EXPECT_EQ(runCommand({"gradzip-no-such-program"}).exitCode, 127);
  CommandResult slow = runCommand({"sleep", "10"}, std::chrono::milliseconds(100));
  EXPECT_TRUE(slow.timedOut);
  EXPECT_THROW(runChecked({"sleep", "10"}, std::chrono::milliseconds(100)), UserError);
}

}  // namespace
}  // namespace gradzip::comm
