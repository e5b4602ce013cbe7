// Facts fixed when gradzip was configured (git revision, LibTorch version),
// recorded beside every run's TTA log. Defined in a file CMake generates from
// cmake/BuildInfo.cpp.in.
#pragma once

namespace gradzip::trainer {

const char* gitRevision();   // "unknown" outside a git checkout
const char* torchVersion();  // e.g. "2.11.0+cu130"
const char* gradzipVersion();

}  // namespace gradzip::trainer
