// Tests comm/Reduction.h on one process: every reduction's lift and combine
// against closed forms (exhaustively for the saturating add on int8 codes), and
// the dtype errors that must name the reduction and the dtype.
#include "comm/Reduction.h"

#include "util/Error.h"

#include <gtest/gtest.h>

#include <string>

namespace gradzip::comm {
namespace {

// Runs fn, expecting a UserError whose message contains every one of `parts`.
template <typename Fn>
void expectUserError(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected UserError";
  } catch (const UserError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(ReductionTest, FloatSumAddsInItsOwnDtype) {
  auto r = floatSum();
  EXPECT_TRUE(r->isPlainSum());
  for (auto dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    EXPECT_EQ(r->accType(dt), dt);
    // 1 + k/2, -k/4 and their sum 1 + k/4 (k < 37) need at most 7 significant
    // bits: exact in every one of these dtypes (bfloat16 has 8).
    at::Tensor a = (at::arange(37, at::kDouble) * 0.5 + 1).to(dt);
    at::Tensor b = (at::arange(37, at::kDouble) * -0.25).to(dt);
    at::Tensor acc = r->lift(a);
    EXPECT_NE(acc.data_ptr(), a.data_ptr()) << "lift must not alias its input";
    r->combine(acc, b);
    EXPECT_EQ(acc.scalar_type(), dt);
    EXPECT_TRUE(at::equal(acc, (at::arange(37, at::kDouble) * 0.25 + 1).to(dt))) << c10::toString(dt);
    EXPECT_TRUE(at::equal(a, (at::arange(37, at::kDouble) * 0.5 + 1).to(dt))) << "input modified";
  }
  expectUserError([&] { r->accType(at::kInt); }, {"floatSum", "Int"});
  expectUserError([&] { r->lift(at::zeros({3}, at::kByte)); }, {"floatSum", "Byte"});
  at::Tensor acc = at::zeros({3});
  expectUserError([&] { r->combine(acc, at::zeros({3}, at::kDouble)); }, {"floatSum", "Double"});
  expectUserError([&] { r->combine(acc, at::zeros({4})); }, {"floatSum", "3", "4"});
}

// A large random float combine goes through the vectorised loop (odd length to
// exercise the tail) and must equal ATen's a + b bit for bit.
TEST(ReductionTest, FloatSumMatchesAtenBitForBit) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  for (auto dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    at::Tensor a = at::randn({10007}, gen, at::kFloat).to(dt);
    at::Tensor b = at::randn({10007}, gen, at::kFloat).to(dt);
    at::Tensor acc = floatSum()->lift(a);
    floatSum()->combine(acc, b);
    EXPECT_TRUE(at::equal(acc, a + b)) << c10::toString(dt);
  }
}

TEST(ReductionTest, WideIntSumWidensWithoutOverflow) {
  for (auto wide : {at::kInt, at::kLong}) {
    auto r = wideIntSum(wide);
    EXPECT_TRUE(r->isPlainSum());
    // int8 extremes: four copies of 127 and -128 overflow int8 but not int32.
    at::Tensor codes = at::tensor({127, -128, 0, -1}, at::kChar);
    at::Tensor acc = r->lift(codes);
    EXPECT_EQ(acc.scalar_type(), wide);
    for (int i = 0; i < 3; ++i) r->combine(acc, r->lift(codes));
    EXPECT_TRUE(at::equal(acc, at::tensor({508, -512, 0, -4}, wide)));
    // uint8 255 is 255, not -1.
    at::Tensor u = r->lift(at::tensor({255, 1}, at::kByte));
    r->combine(u, r->lift(at::tensor({255, 2}, at::kByte)));
    EXPECT_TRUE(at::equal(u, at::tensor({510, 3}, wide)));
    // int16 and int32 inputs.
    at::Tensor s = r->lift(at::tensor({32767}, at::kShort));
    r->combine(s, r->lift(at::tensor({32767}, at::kShort)));
    EXPECT_TRUE(at::equal(s, at::tensor({65534}, wide)));
    // Lifting an accumulator-typed input still copies.
    at::Tensor same = at::tensor({5}, wide);
    EXPECT_NE(r->lift(same).data_ptr(), same.data_ptr());
  }
  // int32 inputs near the top only fit an int64 accumulator.
  auto r64 = wideIntSum(at::kLong);
  at::Tensor big = r64->lift(at::tensor({2147483647}, at::kInt));
  r64->combine(big, r64->lift(at::tensor({2147483647}, at::kInt)));
  EXPECT_EQ(big.item<int64_t>(), int64_t{4294967294});

  expectUserError([] { wideIntSum(at::kInt)->accType(at::kLong); }, {"wideIntSum", "Long", "narrow"});
  expectUserError([] { wideIntSum()->accType(at::kFloat); }, {"wideIntSum", "Float"});
  expectUserError([] { wideIntSum(at::kShort); }, {"wideIntSum", "Short"});
}

// Sat(x, y) = min(2^(b-1)-1, max(-2^(b-1)+1, x+y)) for every pair of int8 codes
// and every b <= 8, checked exhaustively: it never wraps around.
TEST(ReductionTest, SaturatingAddExhaustiveOnInt8) {
  for (int bits = 2; bits <= 8; ++bits) {
    auto r = saturatingAdd(bits);
    EXPECT_FALSE(r->isPlainSum());
    const int lim = (1 << (bits - 1)) - 1;
    const int64_t side = 2 * lim + 1;
    // All pairs (x, y) in [-lim, lim]^2, flattened.
    at::Tensor x = (at::arange(side * side, at::kInt).div(side, "floor") - lim).to(at::kChar);
    at::Tensor y = (at::arange(side * side, at::kInt).remainder(side) - lim).to(at::kChar);
    at::Tensor acc = r->lift(x);
    r->combine(acc, y);
    at::Tensor expected = (x.to(at::kInt) + y.to(at::kInt)).clamp(-lim, lim).to(at::kChar);
    EXPECT_TRUE(at::equal(acc, expected)) << "bits " << bits;
    EXPECT_EQ(acc.max().item<int>(), lim);
    EXPECT_EQ(acc.min().item<int>(), -lim);
  }
  // lift clamps codes outside the range (-128 is not a valid 8-bit code).
  at::Tensor lifted = saturatingAdd(8)->lift(at::tensor({-128, 127, 5}, at::kChar));
  EXPECT_TRUE(at::equal(lifted, at::tensor({-127, 127, 5}, at::kChar)));
  at::Tensor lifted4 = saturatingAdd(4)->lift(at::tensor({-9, 9, 5, -7}, at::kChar));
  EXPECT_TRUE(at::equal(lifted4, at::tensor({-7, 7, 5, -7}, at::kChar)));
}

TEST(ReductionTest, SaturatingAddOnInt16) {
  for (int bits : {4, 9, 12, 16}) {
    auto r = saturatingAdd(bits);
    const int lim = (1 << (bits - 1)) - 1;
    // A grid of 401 values across [-lim, lim], all pairs.
    at::Tensor v = at::linspace(-lim, lim, 401, at::kDouble).round().to(at::kInt);
    at::Tensor x = v.repeat_interleave(401), y = v.repeat({401});
    at::Tensor acc = r->lift(x.to(at::kShort));
    r->combine(acc, y.to(at::kShort));
    EXPECT_EQ(acc.scalar_type(), at::kShort);
    EXPECT_TRUE(at::equal(acc, (x + y).clamp(-lim, lim).to(at::kShort))) << "bits " << bits;
  }
  // Saturation never flips the sign: lim + lim stays lim (int16's 32767 + 32767
  // would wrap to -2).
  auto r = saturatingAdd(16);
  at::Tensor acc = r->lift(at::tensor({32767, -32767}, at::kShort));
  r->combine(acc, at::tensor({32767, -32767}, at::kShort));
  EXPECT_TRUE(at::equal(acc, at::tensor({32767, -32767}, at::kShort)));
}

TEST(ReductionTest, SaturatingAddLongRandomMatchesReference) {
  // 10007 elements: the vectorised body and its scalar tail.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  at::Tensor a = at::randint(-127, 128, {10007}, gen, at::kChar);
  at::Tensor b = at::randint(-127, 128, {10007}, gen, at::kChar);
  auto r = saturatingAdd(8);
  at::Tensor acc = r->lift(a);
  r->combine(acc, b);
  EXPECT_TRUE(at::equal(acc, (a.to(at::kInt) + b.to(at::kInt)).clamp(-127, 127).to(at::kChar)));
}

TEST(ReductionTest, SaturatingAddRejectsBadBitsAndDtypes) {
  expectUserError([] { saturatingAdd(1); }, {"saturatingAdd", "1"});
  expectUserError([] { saturatingAdd(17); }, {"saturatingAdd", "17"});
  expectUserError([] { saturatingAdd(4)->accType(at::kFloat); }, {"saturatingAdd(4)", "Float"});
  expectUserError([] { saturatingAdd(12)->accType(at::kChar); }, {"saturatingAdd(12)", "Char", "int16"});
  expectUserError([] { saturatingAdd(8)->accType(at::kByte); }, {"saturatingAdd(8)", "Byte"});
}

// THC Alg. 2 with the paper's optimal (4, 30, 1/32) table.
const std::vector<int64_t> kThcTable = {0, 3, 5, 7, 9, 11, 13, 14, 16, 17, 19, 21, 23, 25, 27, 30};

TEST(ReductionTest, TableLookupSumAddsTableEntries) {
  at::Tensor table = at::tensor(kThcTable, at::kLong);
  for (auto wide : {at::kInt, at::kLong}) {
    auto r = tableLookupSum(table, wide);
    EXPECT_FALSE(r->isPlainSum());
    EXPECT_EQ(r->accType(at::kByte), wide);
    at::Tensor c1 = at::arange(16, at::kLong).to(at::kByte);          // 0..15
    at::Tensor c2 = (15 - at::arange(16, at::kLong)).to(at::kByte);   // 15..0
    at::Tensor acc = r->lift(c1);
    EXPECT_TRUE(at::equal(acc, table.to(wide)));
    r->combine(acc, r->lift(c2));
    // A symmetric table: T[z] + T[15 - z] = g = 30 for every z.
    EXPECT_TRUE(at::equal(acc, at::full({16}, 30, wide)));
  }
  auto r = tableLookupSum(table);
  expectUserError([&] { r->lift(at::tensor({3, 16}, at::kByte)); }, {"tableLookupSum", "16"});
  expectUserError([&] { r->accType(at::kChar); }, {"tableLookupSum", "Char"});
  expectUserError([&] { tableLookupSum(at::tensor({int64_t{1} << 40}, at::kLong), at::kInt); }, {"int32"});
  expectUserError([&] { tableLookupSum(at::zeros({300}, at::kLong)); }, {"300"});
  expectUserError([&] { tableLookupSum(at::zeros({4}, at::kFloat)); }, {"int64"});
  EXPECT_EQ(r->lift(at::empty({0}, at::kByte)).numel(), 0);
}

}  // namespace
}  // namespace gradzip::comm
