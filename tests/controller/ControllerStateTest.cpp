// Tests controller/ControllerState.h: every field round-trips through a
// checkpoint archive exactly, and a checkpoint of another format (none, the
// older positional one, another version, a missing field) is refused with a
// message naming what differs.
#include "controller/ControllerState.h"

#include "util/Error.h"

#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <functional>
#include <sstream>

using gradzip::UserError;
using gradzip::trainer::ControllerState;

namespace {

ControllerState sample() {
  ControllerState s;
  s.plan = "topkc{bits: 2}@engine";
  s.decided = true;
  s.lastDecision = 221;
  s.decisions = 4;
  s.alpha = 1.25e-4;
  s.beta = 4.0e-7;
  s.provisionalDone = true;
  s.stepArmed = true;
  s.stepReference = 0.4375;
  s.syncReference = 0.0625;
  s.planSteps = 37;
  s.measuredRefs = true;
  s.networkBackoff = 4;
  s.noise = {3.5, -0.25, 12};
  return s;
}

// The archive as bytes, and read back.
std::string bytes(const std::function<void(torch::serialize::OutputArchive&)>& fill) {
  torch::serialize::OutputArchive out;
  fill(out);
  std::ostringstream os;
  out.save_to(os);
  return os.str();
}

ControllerState loadFrom(const std::string& data) {
  std::istringstream is(data);
  torch::serialize::InputArchive in;
  in.load_from(is);
  return ControllerState::load(in);
}

std::string errorOf(const std::string& data) {
  try {
    loadFrom(data);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(ControllerState, EveryFieldRoundTripsExactly) {
  const auto s = sample();
  const auto r = loadFrom(bytes([&](auto& ar) { s.save(ar); }));
  EXPECT_EQ(r.plan, s.plan);
  EXPECT_EQ(r.decided, s.decided);
  EXPECT_EQ(r.lastDecision, s.lastDecision);
  EXPECT_EQ(r.decisions, s.decisions);
  EXPECT_EQ(r.alpha, s.alpha);
  EXPECT_EQ(r.beta, s.beta);
  EXPECT_EQ(r.provisionalDone, s.provisionalDone);
  EXPECT_EQ(r.stepArmed, s.stepArmed);
  EXPECT_EQ(r.stepReference, s.stepReference);
  EXPECT_EQ(r.syncReference, s.syncReference);
  EXPECT_EQ(r.planSteps, s.planSteps);
  EXPECT_EQ(r.measuredRefs, s.measuredRefs);
  EXPECT_EQ(r.networkBackoff, s.networkBackoff);
  EXPECT_EQ(r.noise, s.noise);
}

TEST(ControllerState, AnotherFormatIsRefusedNamingWhatDiffers) {
  // The positional tensor of older builds, without a version.
  const auto legacy = bytes([](auto& ar) {
    ar.write("controller/state", torch::zeros({13}, torch::kDouble), true);
  });
  EXPECT_NE(errorOf(legacy).find("unversioned positional format"), std::string::npos) << errorOf(legacy);
  // No controller state at all (a static plan's checkpoint).
  const auto none = bytes([](auto& ar) { ar.write("other", torch::zeros({1}), true); });
  EXPECT_NE(errorOf(none).find("holds no controller state"), std::string::npos) << errorOf(none);
  // Another version: both named.
  const auto future = bytes([](auto& ar) {
    sample().save(ar);
    ar.write("controller/version", torch::tensor({double(ControllerState::kVersion + 1)}, torch::kDouble), true);
  });
  EXPECT_NE(errorOf(future).find(fmt::format("version {}, this gradzip reads version {}",
                                             ControllerState::kVersion + 1, ControllerState::kVersion)),
            std::string::npos)
      << errorOf(future);
}

TEST(ControllerState, AMissingOrMalformedFieldIsNamed) {
  // Only the version and the plan: the first field read after them is named.
  const auto partial = bytes([](auto& ar) {
    ar.write("controller/version", torch::tensor({double(ControllerState::kVersion)}, torch::kDouble), true);
    ar.write("controller/plan", c10::IValue(std::string("fp16@engine")));
  });
  EXPECT_NE(errorOf(partial).find("lacks the field 'decided'"), std::string::npos) << errorOf(partial);
  const auto negative = bytes([](auto& ar) {
    sample().save(ar);
    ar.write("controller/plan_steps", torch::tensor({-3.0}, torch::kDouble), true);
  });
  EXPECT_NE(errorOf(negative).find("'plan_steps' is -3, expected an integer >= 0"), std::string::npos)
      << errorOf(negative);
  const auto badBackoff = bytes([](auto& ar) {
    sample().save(ar);
    ar.write("controller/network_backoff", torch::tensor({0.5}, torch::kDouble), true);
  });
  EXPECT_NE(errorOf(badBackoff).find("'network_backoff'"), std::string::npos) << errorOf(badBackoff);
}
