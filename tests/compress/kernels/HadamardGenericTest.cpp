// Tests compress/kernels/HadamardGeneric: the ATen transform against the CPU
// kernels of compress/kernels/Hadamard.h bit for bit (the random signs, the
// unnormalised FWHT, the forward and inverse RHT, full and partial rotations,
// d with and without padding) and its inversion. The same bits on a GPU:
// tests/gpu/GpuThcTest.cpp.
#include "compress/kernels/HadamardGeneric.h"

#include "compress/kernels/Hadamard.h"
#include "tests/compress/AggregateHarness.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

namespace gradzip::compress {
namespace {

TEST(HadamardGeneric, SignsEqualApplyRandomSigns) {
  for (int64_t n : {1, 63, 64, 65, 1000}) {
    at::Tensor ones = at::ones({n});
    at::Tensor expect = at::empty({n});
    applyRandomSigns(ones.data_ptr<float>(), 0, n, 77, expect.data_ptr<float>());
    EXPECT_TRUE(testing::bitEqual(generic::randomSigns(n, 77, at::kCPU), expect)) << n;
  }
}

TEST(HadamardGeneric, FwhtEqualsTheKernelBitForBit) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  for (int64_t block : {1, 8, 64, 1024, 8192, 16384})
    for (int64_t blocks : {1, 3}) {
      const at::Tensor x = at::randn({block * blocks}, gen);
      at::Tensor expect = x.clone();
      fwhtInPlace(expect.data_ptr<float>(), expect.numel(), block);
      EXPECT_TRUE(testing::bitEqual(generic::fwht(x, block), expect)) << block << " x " << blocks;
    }
}

TEST(HadamardGeneric, RotationEqualsRandomizedHadamardBitForBit) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
  for (int64_t d : {1, 5, 8, 1000, 4096, 70000})
    for (int blockLog2 : {0, 3, 8, 10}) {
      SCOPED_TRACE(::testing::Message() << "d " << d << " block log2 " << blockLog2);
      RandomizedHadamard rht(d, blockLog2);
      const at::Tensor x = at::randn({d}, gen);
      const at::Tensor r = generic::rhtForward(rht, x, 123);
      EXPECT_TRUE(testing::bitEqual(r, rht.forward(x, 123)));
      const at::Tensor y = at::randn({rht.paddedDim()}, gen);
      EXPECT_TRUE(testing::bitEqual(generic::rhtInverse(rht, y, 123), rht.inverse(y, 123)));
      // Orthonormal: the inverse of the rotation gives x back up to rounding.
      EXPECT_TRUE(at::allclose(generic::rhtInverse(rht, r, 123), x, 1e-5, 1e-5));
    }
}

}  // namespace
}  // namespace gradzip::compress
