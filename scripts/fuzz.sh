#!/usr/bin/env bash
# Fuzzes gradzip's input readers with libFuzzer + ASan + UBSan (clang 14): the
# YAML run config, IDX (gzip), CIFAR-10 binary, image decoding and the text
# corpus (tests/fuzz/*Fuzz.cpp). Installs clang and its runtimes if missing,
# configures a separate clang build directory with -DGRADZIP_FUZZ=ON, builds the
# targets, runs each for a fixed time from its seeds (tests/fuzz/corpus/<target>,
# plus configs/ for the config target), prints a summary and exits non-zero if
# any target crashed, hung, leaked or tripped a sanitizer. Not part of CI.
#
#   bash scripts/fuzz.sh                  every target, 60 s each
#   bash scripts/fuzz.sh 300 idx text     chosen targets, 300 s each
#
# New inputs go to <build>/fuzz-corpus/<target> (kept between runs, so later runs
# continue from them); a crashing input is saved as
# <build>/fuzz-artifacts/<target>/crash-* and its log as <build>/fuzz-logs/<target>.log.
# Replay one with: <build>/tests/fuzz/gradzip_fuzz_<target> FILE
# Environment: GRADZIP_FUZZ_BUILD_DIR (default build-fuzz), GRADZIP_JOBS (default 2).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gz_init fuzz
ROOT=$GZ_ROOT
ALL_TARGETS=(config idx cifar10 image text)
SECS=${1:-60}
[ $# -gt 0 ] && shift
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL_TARGETS[@]}")
case "$SECS" in ''|*[!0-9]*) echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]  (targets: ${ALL_TARGETS[*]})" >&2; exit 2;; esac
for t in "${TARGETS[@]}"; do
  [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || { echo "unknown fuzz target '$t' (known: ${ALL_TARGETS[*]})" >&2; exit 2; }
done
BUILD=${GRADZIP_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
JOBS=${GRADZIP_JOBS:-2}

gz_require_debian
gz_step "packages (clang 14 and its libFuzzer/sanitizer runtimes)"
gz_apt_install clang-14 libclang-rt-14-dev
gz_require_torch_venv

gz_step "configure ${BUILD}"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DGRADZIP_FUZZ=ON -DGRADZIP_CUDA=OFF >/dev/null

gz_step "build (-j${JOBS}): ${TARGETS[*]}"
nice -n 10 ninja -C "$BUILD" -j"$JOBS" "${TARGETS[@]/#/gradzip_fuzz_}"

gz_write_lsan_suppressions "$BUILD/lsan.supp"
export ASAN_OPTIONS="detect_leaks=1"
export LSAN_OPTIONS="suppressions=$BUILD/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

gz_step "fuzzing ${#TARGETS[@]} target(s), ${SECS} s each"
mkdir -p "$BUILD/fuzz-logs"
summary=()
failed=0
for t in "${TARGETS[@]}"; do
  work="$BUILD/fuzz-corpus/$t"
  artifacts="$BUILD/fuzz-artifacts/$t"
  log="$BUILD/fuzz-logs/$t.log"
  mkdir -p "$work" "$artifacts"
  seeds=("$ROOT/tests/fuzz/corpus/$t")
  [ "$t" = config ] && seeds+=("$ROOT/configs")
  maxlen=4096
  [ "$t" = cifar10 ] && maxlen=8192  # room for two 3073-byte records and a partial third
  echo "-- $t (log: $log)"
  rc=0
  # -timeout: one input running 25 s is a hang; -rss_limit_mb: LibTorch plus ASan's
  # shadow need more than libFuzzer's 2 GiB default, while a single malloc is
  # still capped at 2 GiB (-malloc_limit_mb) so a header-sized allocation shows.
  "$BUILD/tests/fuzz/gradzip_fuzz_$t" -max_total_time="$SECS" -timeout=25 -rss_limit_mb=4096 \
    -malloc_limit_mb=2048 -max_len="$maxlen" -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$work" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corpus=$(find "$work" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    result=ok
  else
    result="FAILED (exit $rc)"
    failed=1
    grep -E 'ERROR: |SUMMARY: |gradzip fuzz: |Test unit written to' "$log" | head -8 | sed 's/^/   /'
  fi
  summary+=("$(printf '%-8s %6ss %12s %8s %8s  %s' "$t" "$SECS" "${execs:-?}" "${cov:-?}" "$corpus" "$result")")
done

printf '\n%-8s %7s %12s %8s %8s  %s\n' target time executions coverage corpus result
printf '%s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "gradzip fuzz: a target failed; inputs under $BUILD/fuzz-artifacts, logs under $BUILD/fuzz-logs" >&2
  exit 1
fi
