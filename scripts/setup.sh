#!/usr/bin/env bash
# gradzip set-up, idempotent and non-interactive: installs the Debian packages,
# the pinned torch wheel into .venv, configures and builds, then (optionally)
# runs the default job or the test suite.
#
#   bash scripts/setup.sh          install + build
#   bash scripts/setup.sh run      install + build + the default experiment
#   bash scripts/setup.sh test     install + build + the whole test suite
#
# Environment: GRADZIP_BUILD_DIR (default build), GRADZIP_CUDA (AUTO|ON|OFF),
# GRADZIP_JOBS (default 2).
set -euo pipefail

TORCH_VERSION=2.11.0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GRADZIP_BUILD_DIR:-$ROOT/build}
JOBS=${GRADZIP_JOBS:-2}
MODE=${1:-build}
STEP="start"

step() { STEP="$*"; printf '\n== gradzip setup: %s\n' "$*"; }
trap 'rc=$?; echo "gradzip setup FAILED during: ${STEP} (exit ${rc}). Fix the cause above and re-run; every step is safe to repeat." >&2' ERR

case "$MODE" in build|run|test) ;; *) echo "usage: $0 [build|run|test]" >&2; exit 2;; esac

if [ ! -r /etc/debian_version ]; then
  echo "gradzip setup: this script targets Debian 12 (bookworm); /etc/debian_version not found" >&2; exit 1
fi
# Root (or sudo) is needed only to install missing packages.
SUDO=""

PACKAGES=(
  g++ cmake ninja-build ccache pkg-config git
  libyaml-cpp-dev libspdlog-dev libfmt-dev libopencv-dev libsentencepiece-dev libcli11-dev
  nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libgloo-dev zlib1g-dev
  iproute2 dataset-fashion-mnist linux-doc python3-venv python3-pip
)
step "Debian packages"
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null ||
      { echo "gradzip setup: missing packages (${missing[*]}): run as root or install sudo" >&2; exit 1; }
    SUDO="sudo"
  fi
  echo "installing: ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "all ${#PACKAGES[@]} packages present"
fi

step "torch ${TORCH_VERSION} wheel in .venv"
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$ROOT/.venv"
fi
have=$("$ROOT/.venv/bin/python" -c "import importlib.metadata as m; print(m.version('torch'))" 2>/dev/null || true)
if [ "${have%%+*}" != "$TORCH_VERSION" ]; then
  # The full wheel with its CUDA runtime packages: libtorch_cpu itself needs
  # libcudart/libcupti, and torchrun and the PyTorch DDP peer arm import torch.
  "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check "torch==${TORCH_VERSION}"
fi
if ! "$ROOT/.venv/bin/python" -c "import matplotlib" 2>/dev/null; then
  "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check "matplotlib==3.9.2"
fi
if ! "$ROOT/.venv/bin/python" -c "import pytest" 2>/dev/null; then
  "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check "pytest==9.2.0"
fi
"$ROOT/.venv/bin/python" -c "import torch; print('torch', torch.__version__)"

step "configure and build (${BUILD}, -j${JOBS})"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRADZIP_CUDA="${GRADZIP_CUDA:-AUTO}" >/dev/null
ninja -C "$BUILD" -j"$JOBS"

step "the gradzip Python package in .venv"
# The build stages the package in $BUILD/python/gradzip; a .pth file puts it on
# .venv's path, so `import gradzip` sees each rebuild without a reinstall.
SITE=$("$ROOT/.venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$BUILD/python" > "$SITE/gradzip.pth"
"$ROOT/.venv/bin/python" -c "import gradzip; print('import gradzip:', gradzip.__version__, 'from', gradzip.__file__)"

case "$MODE" in
  run)
    cd "$ROOT"
    # The emulated 20 Mbit/s link needs root and network namespaces; `unshare
    # --net true` checks both and leaves nothing behind.
    if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
      SUITE=configs/quickstart.yaml SUITE_DIR=runs/quickstart NOTE=""
      step "default job: ${SUITE} (2 ranks over an emulated 20 Mbit/s link)"
    else
      SUITE=configs/quickstart_loopback.yaml SUITE_DIR=runs/quickstart_loopback
      if [ "$(id -u)" = 0 ]; then why="network namespaces are not available here (unshare --net failed)"
      else why="not root"; fi
      NOTE="This ran on loopback (${why}), where compression has little to win. To emulate a 20 Mbit/s link, run as root: sudo bash scripts/setup.sh run"
      step "default job: ${SUITE} (2 ranks on loopback: ${why})"
    fi
    rc=0 start=$SECONDS
    "$BUILD/gradzip" compare "$SUITE" || rc=$?
    if [ -f "$SUITE_DIR/summary.json" ]; then
      STEP="plotting ${SUITE_DIR}"
      # One evaluation per point: the curves then cross the targets where the table says.
      "$ROOT/.venv/bin/python" experiments/python/plot_tta.py "$SUITE_DIR" --window 1 >/dev/null
      echo "accuracy against training seconds, one curve per arm: $ROOT/$SUITE_DIR/tta.png"
    fi
    took=$((SECONDS - start))
    echo "default job: $((took / 60)) min $((took % 60)) s (set-up excluded)"
    if [ -n "$NOTE" ]; then echo "$NOTE"; fi
    exit "$rc"
    ;;
  test)
    step "test suite (ctest)"
    cd "$BUILD"
    exec ctest --output-on-failure -j"$JOBS" --timeout 300
    ;;
esac
