#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (gcc):
# configures a separate build directory with -DGRADZIP_SANITIZE=ON (our code is
# instrumented; the LibTorch wheel and Debian's libraries are not), builds every
# target (the CLI too: the trainer tests run it) and runs ctest with the
# sanitizer options below, exiting non-zero on any test failure or sanitizer
# report. Not part of CI (see README "Fuzzing and sanitizers" for its duration).
#
#   bash scripts/sanitize.sh                 configure + build + the whole suite
#   bash scripts/sanitize.sh -R Idx -L data  extra arguments go to ctest
#
# Environment: GRADZIP_SANITIZE_BUILD_DIR (default build-asan), GRADZIP_JOBS
# (default 2). Needs scripts/setup.sh to have run once (packages, torch wheel).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gz_init sanitize
ROOT=$GZ_ROOT
BUILD=${GRADZIP_SANITIZE_BUILD_DIR:-$ROOT/build-asan}
JOBS=${GRADZIP_JOBS:-2}
START=$SECONDS

gz_require_debian
gz_step "packages (gcc's ASan/UBSan runtimes)"
gz_apt_install g++ cmake ninja-build libasan8 libubsan1
gz_require_torch_venv

gz_step "configure ${BUILD}"
# -O1 -g: the usual sanitizer setting (readable stacks, bearable speed). A
# longer per-test timeout: instrumented code and the redzone allocator make the
# distributed tests a few times slower.
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DGRADZIP_SANITIZE=ON -DGRADZIP_CUDA=OFF \
  -DGRADZIP_TEST_TIMEOUT=600 >/dev/null

gz_step "build (-j${JOBS})"
nice -n 10 ninja -C "$BUILD" -j"$JOBS"
BUILT=$SECONDS

# Sanitizer runtime options, shared by every test process and the gradzip
# processes the CLI tests start (they inherit the environment):
#  - detect_leaks=1: LeakSanitizer at exit. The suppressions file of
#    gz_write_lsan_suppressions (lib.sh) is empty today; print_suppressions=1
#    shows any that a future entry matches.
#  - check_initialization_order/strict_init_order: static initialisers of our
#    libraries must not read globals of another translation unit.
#  - UBSan: print the stack and stop at the first finding (gcc's UBSan otherwise
#    recovers, and a test could pass with a report in its log).
gz_write_lsan_suppressions "$BUILD/lsan.supp"
export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1"
export LSAN_OPTIONS="suppressions=$BUILD/lsan.supp:print_suppressions=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

gz_step "test suite (ctest -j${JOBS})"
cd "$BUILD"
rc=0
ctest --output-on-failure -j"$JOBS" "$@" || rc=$?
END=$SECONDS
printf '\ngradzip sanitize: build %dm%02ds, tests %dm%02ds, total %dm%02ds; ctest exit %d\n' \
  $(((BUILT - START) / 60)) $(((BUILT - START) % 60)) $(((END - BUILT) / 60)) $(((END - BUILT) % 60)) \
  $(((END - START) / 60)) $(((END - START) % 60)) "$rc"
exit "$rc"
