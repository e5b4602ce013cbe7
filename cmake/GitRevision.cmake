# Writes OUT, a C++ file defining gradzip::trainer::gitRevision() (trainer/BuildInfo.h),
# from `git rev-parse HEAD` in SRC at build time, with "-dirty" when tracked files differ
# from HEAD. Run by the gradzip_git_revision target on every build; rewrites OUT only
# when the revision changed, so an unchanged checkout recompiles nothing.
# Usage: cmake -DSRC=<source dir> -DOUT=<file> -P GitRevision.cmake
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT rev)
  set(rev "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" diff --quiet HEAD -- RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    string(APPEND rev "-dirty")
  endif()
endif()
set(text "// Generated at build time by cmake/GitRevision.cmake: see trainer/BuildInfo.h.
#include \"trainer/BuildInfo.h\"

namespace gradzip::trainer {
const char* gitRevision() { return \"${rev}\"; }
}  // namespace gradzip::trainer
")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
