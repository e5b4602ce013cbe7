// Tests of comm/RateSchedule.h, the link-rate schedules of the network
// emulator (in seconds or in epochs, parsed from strings and YAML, looked up
// and round-tripped, errors naming file, line and key), and of the emulator's
// options (comm/NetEmulator.h NetEmulatorOptions) in YAML. Nothing here needs
// root.
#include "comm/NetEmulator.h"
#include "comm/RateSchedule.h"
#include "util/Error.h"
#include "util/Yaml.h"

#include <gtest/gtest.h>

#include <string>

namespace gradzip::comm {
namespace {

TEST(RateSchedule, ParsesValidatesAndLooksUp) {
  RateSchedule s = RateSchedule::parse("0:50,10:unshaped,20.5:10");
  ASSERT_EQ(s.steps().size(), 3u);
  EXPECT_EQ(s.rateAt(0.0), 50.0);
  EXPECT_EQ(s.rateAt(9.99), 50.0);
  EXPECT_FALSE(s.rateAt(10.0).has_value());
  EXPECT_EQ(s.rateAt(100.0), 10.0);
  EXPECT_EQ(RateSchedule::parse(s.toString()).toString(), s.toString());
  EXPECT_THROW(RateSchedule::parse("5:50"), UserError);           // must start at 0
  EXPECT_THROW(RateSchedule::parse("0:50,3:10,3:20"), UserError);  // not increasing
  EXPECT_THROW(RateSchedule::parse("0:fast"), UserError);
  EXPECT_THROW(RateSchedule::parse("0:0"), UserError);  // below kMinMbit
}

TEST(RateSchedule, YamlRoundTripAndErrorsNameTheKey) {
  auto r = YamlReader::loadString("schedule:\n  - {at: 0, mbit: 100}\n  - {at: 30, mbit: unshaped}\n", "s.yaml");
  RateSchedule s = RateSchedule::fromYaml(r, "schedule");
  EXPECT_EQ(s.toString(), "0:100,30:unshaped");
  YAML::Node n(YAML::NodeType::Sequence);
  s.toYaml(n);
  YAML::Node root;
  root["schedule"] = n;
  auto back = YamlReader::loadString(YAML::Dump(root));
  EXPECT_EQ(RateSchedule::fromYaml(back, "schedule").toString(), s.toString());
  auto bad = YamlReader::loadString("schedule:\n  - {at: 0, mbit: lots}\n", "b.yaml");
  try {
    RateSchedule::fromYaml(bad, "schedule");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("b.yaml:2: schedule[0].mbit"), std::string::npos) << e.what();
  }
}

TEST(RateSchedule, EpochStepsParseLookUpAndRoundTrip) {
  RateSchedule s = RateSchedule::parse("0e:50,2e:10,4.5e:unshaped");
  ASSERT_TRUE(s.inEpochs());
  ASSERT_EQ(s.steps().size(), 3u);
  EXPECT_EQ(s.rateAt(0.0), 50.0);
  EXPECT_EQ(s.rateAt(1.999), 50.0);
  EXPECT_EQ(s.rateAt(2.0), 10.0);
  EXPECT_EQ(s.rateAt(4.49), 10.0);
  EXPECT_FALSE(s.rateAt(4.5).has_value());
  EXPECT_EQ(s.toString(), "0e:50,2e:10,4.5e:unshaped");
  EXPECT_TRUE(RateSchedule::parse(s.toString()).inEpochs());
  EXPECT_FALSE(RateSchedule::parse("0:50,2:10").inEpochs());
  EXPECT_FALSE(RateSchedule::parse("20").inEpochs());
  try {
    RateSchedule::parse("0:50,2e:10");
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("mixes seconds and epochs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RateSchedule::parse("1e:50"), UserError);  // must start at epoch 0

  auto r = YamlReader::loadString("schedule:\n  - {epoch: 0, mbit: 100}\n  - {epoch: 1.5, mbit: 5}\n", "e.yaml");
  RateSchedule y = RateSchedule::fromYaml(r, "schedule");
  EXPECT_TRUE(y.inEpochs());
  EXPECT_EQ(y.toString(), "0e:100,1.5e:5");
  YAML::Node n(YAML::NodeType::Sequence);
  y.toYaml(n);
  EXPECT_TRUE(n[1]["epoch"]) << YAML::Dump(n);
  EXPECT_FALSE(n[1]["at"]) << YAML::Dump(n);
  YAML::Node root;
  root["schedule"] = n;
  auto back = YamlReader::loadString(YAML::Dump(root));
  EXPECT_EQ(RateSchedule::fromYaml(back, "schedule").toString(), "0e:100,1.5e:5");
}

TEST(RateSchedule, MixedOrMissingClocksInYamlNameFileLineAndKey) {
  auto expectError = [](const std::string& yaml, const std::string& where, const std::string& what) {
    auto r = YamlReader::loadString(yaml, "m.yaml");
    try {
      RateSchedule::fromYaml(r, "schedule");
      FAIL() << "expected ConfigError for " << yaml;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expectError("schedule:\n  - {at: 0, mbit: 50}\n  - {epoch: 2, mbit: 10}\n", "m.yaml:3: schedule[1].epoch",
              "mixes `at` (seconds) and `epoch`");
  expectError("schedule:\n  - {epoch: 0, mbit: 50}\n  - {at: 9, mbit: 10}\n", "m.yaml:3: schedule[1].at",
              "mixes `at` (seconds) and `epoch`");
  expectError("schedule:\n  - {at: 0, epoch: 0, mbit: 50}\n", "m.yaml:2: schedule[0].epoch", "not both");
  expectError("schedule:\n  - {mbit: 50}\n", "m.yaml:2: schedule[0].at", "needs `at` (seconds) or `epoch`");
  expectError("schedule:\n  - {epoch: 0, mbit: 50}\n  - {epoch: 0, mbit: 10}\n", "schedule", "not after step 0");
}

TEST(NetEmulatorOptions, YamlRoundTripRejectsUnknownKeys) {
  auto r = YamlReader::loadString("ranks: 4\nburst_ms: 2\nschedule:\n  - {at: 0, mbit: 25}\n", "e.yaml");
  NetEmulatorOptions o = NetEmulatorOptions::fromYaml(r);
  EXPECT_EQ(o.ranks, 4);
  EXPECT_EQ(o.burstMillis, 2.0);
  EXPECT_EQ(o.schedule.toString(), "0:25");
  YAML::Node n;
  o.toYaml(n);
  auto back = YamlReader::loadString(YAML::Dump(n));
  NetEmulatorOptions o2 = NetEmulatorOptions::fromYaml(back);
  EXPECT_EQ(o2.ranks, 4);
  EXPECT_EQ(o2.subnet, o.subnet);
  EXPECT_EQ(o2.schedule.toString(), "0:25");
  auto typo = YamlReader::loadString("rnaks: 4\n", "t.yaml");
  EXPECT_THROW(NetEmulatorOptions::fromYaml(typo), ConfigError);
}

}  // namespace
}  // namespace gradzip::comm
