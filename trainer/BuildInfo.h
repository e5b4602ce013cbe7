// Facts fixed when gradzip was configured (git revision, LibTorch version,
// where the source tree and the venv's Python are), recorded beside every run's
// TTA log and used to start the Python peer arms. Defined in a file CMake
// generates from cmake/BuildInfo.cpp.in.
#pragma once

namespace gradzip::trainer {

const char* gitRevision();   // "unknown" outside a git checkout
const char* torchVersion();  // e.g. "2.11.0+cu130"
const char* gradzipVersion();
// The venv's Python (with the same torch wheel) and the source tree; the
// environment variables GRADZIP_PYTHON and GRADZIP_SOURCE_DIR override them.
const char* pythonExecutable();
const char* sourceDir();

}  // namespace gradzip::trainer
