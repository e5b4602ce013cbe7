// Facts about this build (git revision, LibTorch version, where the source
// tree and the venv's Python are), recorded beside every run's TTA log and
// used to start the Python peer arms. Defined in files CMake generates: the
// revision at every build (cmake/GitRevision.cmake), the rest when configured
// (cmake/BuildInfo.cpp.in).
#pragma once

namespace gradzip::trainer {

const char* gitRevision();   // 12 hex digits, "-dirty" with uncommitted changes; "unknown" outside a git checkout
const char* torchVersion();  // e.g. "2.11.0+cu130"
const char* gradzipVersion();
// The venv's Python (with the same torch wheel) and the source tree; the
// environment variables GRADZIP_PYTHON and GRADZIP_SOURCE_DIR override them.
const char* pythonExecutable();
const char* sourceDir();

}  // namespace gradzip::trainer
