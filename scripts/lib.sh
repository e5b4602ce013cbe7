# Shell helpers shared by the developer scripts that sit beside setup.sh
# (fuzz.sh, sanitize.sh): step banners with a failure trap naming the step,
# root/sudo detection, idempotent installation of missing Debian packages (the
# same dpkg-query + apt-get procedure setup.sh follows), and the check that
# setup.sh has already put the pinned torch wheel into .venv. Source it; it
# defines functions and the variables GZ_ROOT and GZ_STEP, and runs nothing else.

GZ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GZ_STEP="start"

# gz_init NAME: banners and the failure trap say "gradzip NAME".
gz_init() {
  GZ_NAME=$1
  trap 'rc=$?; echo "gradzip ${GZ_NAME} FAILED during: ${GZ_STEP} (exit ${rc})" >&2' ERR
}

gz_step() { GZ_STEP="$*"; printf '\n== gradzip %s: %s\n' "${GZ_NAME:-script}" "$*"; }

# gz_require_debian: refuses to run anywhere but Debian (the target platform).
gz_require_debian() {
  if [ ! -r /etc/debian_version ]; then
    echo "gradzip ${GZ_NAME:-script}: this script targets Debian 12 (bookworm); /etc/debian_version not found" >&2
    return 1
  fi
}

# gz_apt_install PACKAGE...: installs the packages that are not installed yet
# (nothing, and no apt-get update, when all are present).
gz_apt_install() {
  local missing=() p sudo=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "all $# packages present: $*"
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "gradzip: run as root or install sudo (missing: ${missing[*]})" >&2; return 1; }
    sudo="sudo"
  fi
  echo "installing: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# gz_require_torch_venv: the torch wheel that cmake/TorchWheel.cmake links
# against must be in .venv; scripts/setup.sh installs it (and the library
# packages the build needs).
gz_require_torch_venv() {
  if ! "$GZ_ROOT/.venv/bin/python" -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null; then
    echo "gradzip ${GZ_NAME:-script}: no torch wheel in $GZ_ROOT/.venv; run 'bash scripts/setup.sh' once first" >&2
    return 1
  fi
}

# gz_write_lsan_suppressions FILE: the LeakSanitizer suppressions of the
# sanitizer and fuzzing runs, deliberately empty. LibTorch, Gloo, OpenCV and
# yaml-cpp are not instrumented, but LSan still sees their allocations; a full
# scripts/sanitize.sh run (print_suppressions=1) and the fuzz runs reported no
# leak at all, so nothing is suppressed. If a library we do not build ever needs
# one, add a narrow `leak:<its .so name>` line here with the reason.
gz_write_lsan_suppressions() {
  cat >"$1" <<'SUPP'
# Written by scripts/lib.sh (gz_write_lsan_suppressions); see the comment there.
# No suppressions are needed today.
SUPP
}
