// Tests the shared helpers of compress/Compressor.{h,cpp} (checkGradient,
// allReduceSum, ScopedPhase) and that every compressor the factory knows
// (compressorNames(), each deployment with its own code path: THC ps and
// all-reduce, C_nat ps and all-gather, GradiVeQ warming up and sampling)
// rejects bad input with a UserError naming the cause: wrong dtype, wrong
// rank, non-contiguous, NaN/Inf (aggregate and encode), empty, and buckets of
// different sizes on different ranks (an error, never a hang).
#include "tests/testing/UserErrorOf.h"
#include "compress/Factory.h"
#include "comm/LocalCommunicator.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/ThreadGroup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <source_location>

namespace gradzip::compress {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::CtxHolder;

const std::vector<std::string> kMine = {"fp32", "fp16", "bf16", "topk", "topkc", "artopk", "powersgd"};


// One compressor configuration: a factory name and its options (YAML text).
struct Spec {
  std::string name, options;
};

// Every deployment with its own aggregation or encoding code (and its own
// finiteness check: THC's and C_nat's are fused into their kernels' passes).
const std::vector<Spec> kOtherDeployments = {
    {"thc", "{deployment: ps}"},
    {"thc", "{deployment: allreduce, rotation_block_log2: 8}"},
    {"cnat", "{deployment: ps}"},
    {"cnat", "{deployment: allgather}"},
    {"dnat", "{}"},
    {"qsgd", "{}"},
    {"gradiveq", "{warmup: 0}"},
};

// kMine with default options, kOtherDeployments, and GradiVeQ in its default
// warm-up; the test below fails when the factory knows a name missing here.
std::vector<Spec> everyCompressor() {
  std::vector<Spec> specs;
  for (const auto& name : kMine) specs.push_back({name, "{}"});
  specs.insert(specs.end(), kOtherDeployments.begin(), kOtherDeployments.end());
  specs.push_back({"gradiveq", "{}"});  // warmup: 2500, so every call here is a warm-up iteration
  return specs;
}

// The options with `error_feedback: false` added: the compressor itself, not
// the ErrorFeedback decorator, whose own checkGradient would answer first.
std::string withoutErrorFeedback(const std::string& options) {
  if (options == "{}") return "{error_feedback: false}";
  return options.substr(0, options.size() - 1) + ", error_feedback: false}";
}

TEST(Compressor, BadInputGivesAClearError) {
  comm::LocalCommunicator local;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::set<std::string> covered;
  for (const auto& [name, options] : everyCompressor()) {
    covered.insert(name);
    std::vector<std::string> variants = {options};
    if (usesErrorFeedback(name, YAML::Load(options))) variants.push_back(withoutErrorFeedback(options));
    for (const auto& opts : variants) {
      const std::string who = name + " " + opts;
      Context ctx = testing::contextFor(local);
      // GradiVeQ with warmup 0 samples from the first call on, which needs a
      // conv layer (none: a plain all-reduce); a [1, 1, 1, 1] one fits every input below.
      if (name == "gradiveq") ctx.layout = {{"conv.weight", {1, 1, 1, 1}, 0, 1}};
      auto c = makeCompressor(name, opts);
      // The UserError names the compressor and the cause.
      auto expectError = [&](const std::function<void()>& f, const std::string& cause,
                             std::source_location at = std::source_location::current()) {
        EXPECT_THAT(testing::userErrorOf(f), AllOf(HasSubstr(name + ":"), HasSubstr(cause))) << who << ", line " << at.line();
      };
      const at::Tensor strided = at::ones({16}).slice(0, 0, 16, 2);
      expectError([&] { c->aggregate(at::zeros({8}, at::kDouble), ctx); }, "float32");
      expectError([&] { c->aggregate(at::zeros({4, 2}), ctx); }, "1-D");
      expectError([&] { c->aggregate(strided, ctx); }, "contiguous");
      expectError([&] { c->encode(strided, ctx); }, "contiguous");
      expectError([&] { c->aggregate(at::tensor({1.f, nan, 2.f}), ctx); }, "NaN");
      expectError([&] { c->aggregate(at::tensor({1.f, -inf}), ctx); }, "Inf");
      expectError([&] { c->encode(at::tensor({inf}), ctx); }, "NaN or Inf");
      expectError([&] { c->encode(at::tensor({1.f, nan}), ctx); }, "NaN or Inf");
      expectError([&] { c->aggregate(at::zeros({0}), ctx); }, "empty");
      // Good input still aggregates: the errors above are about the input.
      EXPECT_NO_THROW(c->aggregate(at::ones({8}), ctx)) << who;
    }
  }
  for (const auto& name : compressorNames()) EXPECT_TRUE(covered.count(name)) << name << " is not checked here";
}

// Rank 1's bucket is 64 coordinates longer. Gloo aborts the process on a
// collective whose sizes differ, so every compressor confirms d across ranks
// (one int64 all-gather) on its first call: both ranks get a UserError naming
// the sizes, well within the group's short timeout (a hang would fail it).
TEST(Compressor, SizeMismatchAcrossRanksIsAClearError) {
  for (const auto& name : kMine) {
    std::string error = "(no error)";
    try {
      testing::runRanks(
          2,
          [&](comm::Communicator& c) {
            CtxHolder h(c, name == "artopk" || name == "topkc" ? "ring" : "engine");
            auto comp = makeCompressor(name);
            comp->aggregate(testing::gaussianInput(4096 + c.rank() * 64, c.rank(), 1), h.ctx);
          },
          std::chrono::seconds(5));
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_THAT(error, HasSubstr("different sizes (coordinates by rank: 4096, 4160)")) << name;
  }
}

// The same guarantee for THC (both deployments), C_nat (both), natural
// dithering, QSGD and GradiVeQ: without the check, THC's norm all-reduce and
// C_nat's point-to-point shards would hang or read garbage on mismatched sizes.
TEST(Compressor, SizeMismatchAcrossRanksIsAClearErrorForEveryCompressor) {
  for (const auto& [name, options] : kOtherDeployments) {
    std::string error = "(no error)";
    try {
      testing::runRanks(
          2,
          [&](comm::Communicator& c) {
            CtxHolder h(c, "engine");
            auto comp = makeCompressor(name, options);
            comp->aggregate(testing::gaussianInput(4096 + c.rank() * 64, c.rank(), 1), h.ctx);
          },
          std::chrono::seconds(5));
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_THAT(error, HasSubstr("different sizes (coordinates by rank: 4096, 4160)")) << name << " " << options;
  }
}

TEST(Compressor, AllReduceSumUsesThePlansCollectiveAndCountsBytes) {
  testing::runRanks(3, [](comm::Communicator& c) {
    for (const char* coll : {"engine", "ring", "tree", "ps"}) {
      CtxHolder h(c, coll);
      PhaseTimes times;
      h.ctx.times = &times;
      at::Tensor t = at::full({5}, static_cast<float>(c.rank()));
      at::Tensor sum = allReduceSum(t, h.ctx);
      EXPECT_TRUE(at::equal(sum, at::full({5}, 3.0f))) << coll;  // 0 + 1 + 2
      EXPECT_TRUE(at::equal(t, at::full({5}, static_cast<float>(c.rank()))));  // input untouched
      EXPECT_EQ(times.bytesSent, 20);
      EXPECT_GE(times.communicate, 0.0);
    }
  });
}

}  // namespace
}  // namespace gradzip::compress
