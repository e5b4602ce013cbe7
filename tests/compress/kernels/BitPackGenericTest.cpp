// Tests compress/kernels/BitPackGeneric: the ATen packing writes the same
// bytes as compress/kernels/BitPack.h's packBits for every width and for
// lengths that are not multiples of eight, reads them back to the same codes
// in every output dtype, and rejects out-of-range codes as packBits does.
#include "compress/kernels/BitPackGeneric.h"

#include "compress/kernels/BitPack.h"
#include "util/Error.h"

#include <gtest/gtest.h>

namespace gradzip::compress {
namespace {

TEST(BitPackGeneric, SameBytesAsTheCpuKernelForEveryWidth) {
  at::manual_seed(11);
  for (int bits = 1; bits <= 32; ++bits)
    for (int64_t n : {0, 1, 7, 8, 9, 15, 1001}) {
      auto codes = at::randint(0, int64_t{1} << bits, {n}, at::kLong);
      if (n > 0) codes[0] = (int64_t{1} << bits) - 1;  // the top code, all ones
      const auto ref = packBits(codes, bits);
      const auto got = generic::packBits(codes, bits);
      ASSERT_EQ(got.scalar_type(), at::kByte);
      ASSERT_TRUE(at::equal(got, ref)) << "bits " << bits << " n " << n;
      if (bits <= 31) {
        ASSERT_TRUE(at::equal(generic::unpackBits(ref, bits, n, at::kInt), unpackBits(ref, bits, n, at::kInt)))
            << "bits " << bits << " n " << n;
      }
      ASSERT_TRUE(at::equal(generic::unpackBits(ref, bits, n, at::kLong), codes)) << "bits " << bits << " n " << n;
    }
}

TEST(BitPackGeneric, NarrowDtypesAndLongerInput) {
  at::manual_seed(12);
  for (int bits : {1, 3, 4, 8}) {
    const auto codes = at::randint(0, int64_t{1} << bits, {77}, at::kByte);
    const auto packed = generic::packBits(codes, bits);
    EXPECT_TRUE(at::equal(packed, packBits(codes, bits)));
    auto longer = at::cat({packed, at::full({5}, 0xFF, at::kByte)});  // trailing bytes are ignored
    EXPECT_TRUE(at::equal(generic::unpackBits(longer, bits, 77, at::kByte), codes));
    EXPECT_TRUE(at::equal(generic::unpackBits(longer, bits, 77, at::kShort), codes.to(at::kShort)));
  }
}

TEST(BitPackGeneric, RejectsBadInput) {
  EXPECT_THROW(generic::packBits(at::tensor({0, 4}, at::kInt), 2), UserError);
  EXPECT_THROW(generic::packBits(at::tensor({-1}, at::kInt), 2), UserError);
  EXPECT_THROW(generic::packBits(at::zeros({3}, at::kFloat), 2), UserError);
  EXPECT_THROW(generic::unpackBits(at::zeros({1}, at::kByte), 3, 4), UserError);
  EXPECT_THROW(generic::unpackBits(at::zeros({4}, at::kByte), 9, 2, at::kByte), UserError);
}

}  // namespace
}  // namespace gradzip::compress
