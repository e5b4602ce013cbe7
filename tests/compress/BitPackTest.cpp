// Tests compress/BitPack: exact sizes, round trips for every width, the LSB-first
// layout, and rejection of out-of-range codes.
#include "compress/BitPack.h"

#include "util/Error.h"

#include <gtest/gtest.h>

namespace gradzip::compress {
namespace {

TEST(BitPack, RoundTripsEveryWidth) {
  at::manual_seed(3);
  for (int bits = 1; bits <= 31; ++bits)
    for (int64_t n : {0, 1, 7, 8, 9, 1001}) {
      auto codes = at::randint(0, int64_t{1} << bits, {n}, at::kLong);
      auto packed = packBits(codes, bits);
      EXPECT_EQ(packed.numel(), (n * bits + 7) / 8);
      auto back = unpackBits(packed, bits, n, at::kLong);
      EXPECT_TRUE(at::equal(back, codes)) << "bits " << bits << " n " << n;
    }
}

TEST(BitPack, FourBitLayoutIsLowNibbleFirst) {
  auto packed = packBits(at::tensor({1, 2, 15}, at::kInt), 4);
  ASSERT_EQ(packed.numel(), 2);
  EXPECT_EQ(packed[0].item<uint8_t>(), 0x21);
  EXPECT_EQ(packed[1].item<uint8_t>(), 0x0F);
  EXPECT_TRUE(at::equal(unpackBits(packed, 4, 3, at::kByte), at::tensor({1, 2, 15}, at::kByte)));
}

TEST(BitPack, RejectsOutOfRangeCodes) {
  EXPECT_THROW(packBits(at::tensor({16}, at::kInt), 4), UserError);
  EXPECT_THROW(packBits(at::tensor({-1}, at::kInt), 4), UserError);
  EXPECT_THROW(unpackBits(at::zeros({1}, at::kByte), 4, 3), UserError);
}

}  // namespace
}  // namespace gradzip::compress
