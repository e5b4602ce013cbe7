// Implements util/Allocator.h with mallopt (glibc); a no-op elsewhere.
#include "util/Allocator.h"

#include <climits>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace gradzip {

bool retainFreedMemory() {
#if defined(__GLIBC__)
  if (const char* v = std::getenv("GRADZIP_RETAIN_MEMORY"); v && std::strcmp(v, "0") == 0) return false;
  if (std::getenv("GLIBC_TUNABLES")) return false;
  // Both settings are needed: an explicit trim threshold alone also freezes
  // the mmap threshold at its 128 KiB default, which is slower still.
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  return false;
#endif
}

}  // namespace gradzip
