// Tests comm/BufferPool.h: a buffer is reused only after every tensor and view
// handed out for it has been dropped, never while someone still holds it.
#include "comm/BufferPool.h"

#include <gtest/gtest.h>

namespace gradzip::comm {
namespace {

TEST(BufferPoolTest, ReusesOnlyReleasedBuffers) {
  BufferPool pool(2);
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  at::Tensor a = pool.acquire(1000, opts);
  EXPECT_EQ(a.numel(), 1000);
  EXPECT_EQ(a.scalar_type(), at::kFloat);
  EXPECT_TRUE(a.is_contiguous());
  void* first = a.data_ptr();
  at::Tensor b = pool.acquire(1000, opts);
  EXPECT_NE(b.data_ptr(), first) << "a is still held";

  at::Tensor view = a.slice(0, 10, 20);  // a view keeps the storage busy
  a.reset();
  at::Tensor c = pool.acquire(1000, opts);
  EXPECT_NE(c.data_ptr(), first) << "a view of the first buffer is still alive";
  c.reset();
  view.reset();
  at::Tensor d = pool.acquire(1000, opts);
  EXPECT_EQ(d.data_ptr(), first) << "the first buffer is free again";
  EXPECT_EQ(pool.heldBytes(), 2 * 4000);
}

TEST(BufferPoolTest, MatchesSizeAndDtype) {
  BufferPool pool(4);
  at::Tensor big = pool.acquire(1 << 20, at::TensorOptions().dtype(at::kByte));
  void* p = big.data_ptr();
  big.reset();
  // A request under half the buffer's size does not pin it ...
  at::Tensor small = pool.acquire(1000, at::TensorOptions().dtype(at::kByte));
  EXPECT_NE(small.data_ptr(), p);
  // ... one that fits within 2x reuses it, in another dtype.
  at::Tensor ints = pool.acquire(100000, at::TensorOptions().dtype(at::kLong));  // 800000 of 2^20 bytes
  EXPECT_EQ(ints.data_ptr(), p);
  EXPECT_EQ(ints.scalar_type(), at::kLong);
  EXPECT_EQ(pool.acquire(0, at::TensorOptions().dtype(at::kFloat)).numel(), 0);
}

TEST(BufferPoolTest, BeyondCapacityAllocatesUnpooled) {
  BufferPool pool(1);
  at::Tensor a = pool.acquire(10, at::TensorOptions().dtype(at::kInt));
  at::Tensor b = pool.acquire(10, at::TensorOptions().dtype(at::kInt));
  EXPECT_NE(a.data_ptr(), b.data_ptr());
  EXPECT_EQ(pool.heldBytes(), 40);
}

}  // namespace
}  // namespace gradzip::comm
