// Tests the shared helpers of compress/Compressor.{h,cpp} (checkGradient,
// allReduceSum, ScopedPhase) and that every compressor of helper 1 (fp32, fp16,
// bf16, topk, topkc, artopk, powersgd) rejects bad input with a clear error:
// wrong dtype, wrong rank, non-contiguous, NaN/Inf, empty, and buckets of
// different sizes on different ranks (an error, never a hang).
#include "compress/Factory.h"
#include "comm/LocalCommunicator.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/ThreadGroup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

namespace gradzip::compress {
namespace {

using ::testing::HasSubstr;
using testing::CtxHolder;

const std::vector<std::string> kMine = {"fp32", "fp16", "bf16", "topk", "topkc", "artopk", "powersgd"};

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

TEST(Compressor, BadInputGivesAClearError) {
  comm::LocalCommunicator local;
  Context ctx = testing::contextFor(local);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const auto& name : kMine) {
    auto c = makeCompressor(name);
    EXPECT_THAT(errorOf([&] { c->aggregate(at::zeros({8}, at::kDouble), ctx); }), HasSubstr("float32")) << name;
    EXPECT_THAT(errorOf([&] { c->aggregate(at::zeros({4, 2}), ctx); }), HasSubstr("1-D")) << name;
    EXPECT_THAT(errorOf([&] { c->aggregate(at::zeros({16}).slice(0, 0, 16, 2), ctx); }), HasSubstr("contiguous"))
        << name;
    EXPECT_THAT(errorOf([&] { c->aggregate(at::tensor({1.f, nan, 2.f}), ctx); }), HasSubstr("NaN")) << name;
    EXPECT_THAT(errorOf([&] { c->aggregate(at::tensor({1.f, -inf}), ctx); }), HasSubstr("Inf")) << name;
    EXPECT_THAT(errorOf([&] { c->encode(at::tensor({inf}), ctx); }), HasSubstr("NaN or Inf")) << name;
    EXPECT_THAT(errorOf([&] { c->aggregate(at::zeros({0}), ctx); }), HasSubstr("empty")) << name;
  }
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
  const std::vector<std::pair<std::string, std::string>> specs = {
      {"thc", "{deployment: ps}"},
      {"thc", "{deployment: allreduce, rotation_block_log2: 8}"},
      {"cnat", "{deployment: ps}"},
      {"cnat", "{deployment: allgather}"},
      {"dnat", "{}"},
      {"qsgd", "{}"},
      {"gradiveq", "{warmup: 0}"},
  };
  for (const auto& [name, options] : specs) {
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
