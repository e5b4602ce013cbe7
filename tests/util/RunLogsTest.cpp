// Tests of util/RunLogs.h: what a resumed run keeps of its JSON-lines logs
// (TTA rows, the controller's decision and plan logs).
#include "util/RunLogs.h"

#include "tests/testing/ThreadGroup.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

using namespace gradzip;

TEST(RunLogs, KeepsTheRecordsOfStepsUpToTheCheckpointAndDropsTornLines) {
  gradzip::testing::TempDir dir;
  const std::string path = dir.path() + "/decisions.jsonl";
  std::ofstream(path) << R"({"event":"start","step":0})" "\n"
                      << R"({"event":"decision","step":30})" "\n"
                      << R"({"event":"followup","decision_step":30,"measured_step":0.1})" "\n"  // of a kept decision
                      << R"({"event":"noise","step":31})" "\n"
                      << R"({"event":"followup","decision_step":35})" "\n"  // of an undone decision
                      << "\n"
                      << R"({"event":"note"})" "\n"            // no step: whose it is is unknown
                      << R"({"event":"noise","step":"40"})" "\n"  // not an integer step
                      << R"({"event":"decision","st)";            // torn by the kill
  keepJsonLinesThrough(path, 30);
  std::ifstream in(path);
  std::stringstream kept;
  kept << in.rdbuf();
  EXPECT_EQ(kept.str(), R"({"event":"start","step":0})" "\n"
                        R"({"event":"decision","step":30})" "\n"
                        R"({"event":"followup","decision_step":30,"measured_step":0.1})" "\n");
}

TEST(RunLogs, AMissingLogIsLeftMissing) {
  gradzip::testing::TempDir dir;
  keepJsonLinesThrough(dir.path() + "/none.jsonl", 10);
  EXPECT_FALSE(std::ifstream(dir.path() + "/none.jsonl").good());
}

TEST(RunLogs, JsonLineStepReadsStepThenDecisionStep) {
  EXPECT_EQ(jsonLineStep(R"({"step":7,"decision_step":3})"), 7);
  EXPECT_EQ(jsonLineStep(R"({"decision_step":3})"), 3);
  EXPECT_EQ(jsonLineStep(R"({"step":7.5})"), -1);
  EXPECT_EQ(jsonLineStep("[1, 2]"), -1);
  EXPECT_EQ(jsonLineStep("not json"), -1);
}
