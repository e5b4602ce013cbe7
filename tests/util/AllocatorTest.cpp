// Tests util/Allocator.h: after retainFreedMemory(), a large allocation comes
// from the heap (no new mmap'ed block) and the opt-out leaves malloc alone.
#include "util/Allocator.h"

#include <gtest/gtest.h>

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizerMalloc = true;  // gcc -fsanitize=address
#elif defined(__has_feature)
constexpr bool kSanitizerMalloc = __has_feature(address_sanitizer);  // clang
#else
constexpr bool kSanitizerMalloc = false;
#endif

TEST(Allocator, LargeBlocksStayInTheHeap) {
  // AddressSanitizer replaces glibc's malloc (scripts/sanitize.sh): mallopt and
  // mallinfo2 describe an allocator that is not in use.
  if (kSanitizerMalloc) GTEST_SKIP() << "glibc malloc is replaced by AddressSanitizer's";
  unsetenv("GLIBC_TUNABLES");
  setenv("GRADZIP_RETAIN_MEMORY", "0", 1);
  EXPECT_FALSE(gradzip::retainFreedMemory());
  unsetenv("GRADZIP_RETAIN_MEMORY");
  ASSERT_TRUE(gradzip::retainFreedMemory());

  const size_t mmappedBefore = mallinfo2().hblkhd;
  constexpr size_t kBytes = 64u << 20;  // far above glibc's largest dynamic mmap threshold (32 MiB)
  auto* p = static_cast<char*>(std::malloc(kBytes));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, kBytes);
  EXPECT_EQ(mallinfo2().hblkhd, mmappedBefore) << "a 64 MiB block was mmap'ed despite M_MMAP_MAX = 0";
  const size_t heapWithBlock = mallinfo2().arena;
  std::free(p);
  // Freed memory is kept (not trimmed back to the OS below the 2 GiB threshold).
  EXPECT_EQ(mallinfo2().arena, heapWithBlock);
}
