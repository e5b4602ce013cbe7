// Tests compress/kernels/BitPack: exact sizes, round trips for every width, the LSB-first
// layout, and rejection of out-of-range codes.
#include "compress/kernels/BitPack.h"

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

// The raw-memory forms (the kernels' tiles; byte, nibble and crumb fast
// paths) write the same bytes as packBits and read back the same codes.
TEST(BitPack, RawMemoryFormsMatchTheTensorForms) {
  at::manual_seed(4);
  for (int bits = 1; bits <= 8; ++bits)
    for (int64_t n : {0, 1, 2, 3, 4, 6, 8, 9, 64, 1001, 4096}) {
      const auto codes = at::randint(0, int64_t{1} << bits, {n}, at::kByte);
      const auto ref = packBits(codes, bits);
      auto raw = at::full({ref.numel()}, 0xAB, at::kByte);  // every byte must be written
      packCodes(codes.data_ptr<uint8_t>(), n, bits, raw.data_ptr<uint8_t>());
      EXPECT_TRUE(at::equal(raw, ref)) << "bits " << bits << " n " << n;
      auto back8 = at::empty({n}, at::kByte);
      unpackCodes(ref.data_ptr<uint8_t>(), bits, n, back8.data_ptr<uint8_t>());
      EXPECT_TRUE(at::equal(back8, codes)) << "bits " << bits << " n " << n;
      auto back32 = at::empty({n}, at::kInt);
      unpackCodes(ref.data_ptr<uint8_t>(), bits, n, back32.data_ptr<int32_t>());
      EXPECT_TRUE(at::equal(back32, codes.to(at::kInt))) << "bits " << bits << " n " << n;
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
