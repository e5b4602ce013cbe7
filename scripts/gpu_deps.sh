#!/usr/bin/env bash
# Prepares what scripts/gpu_check.sh carries to a GPU machine that has CUDA,
# CMake, ninja and python3 with the pinned torch, but no Debian packages and no
# package registry: the .deb files of gradzip's build dependencies, downloaded
# here into .gpu-deps/debs (ignored by git) and unpacked there into a private
# prefix. Image-folder decoding (OpenCV imgcodecs, which pulls in GDAL and a
# hundred more libraries) is left out of that build: cmake/OpenCV.cmake.
# Run on a Debian 12 machine with apt; the result is about 10 MB.
#   scripts/gpu_deps.sh            # then: device run, carry [".gpu-deps"]
set -euo pipefail
cd "$(dirname "$0")/.."

# Headers, CMake/pkg-config files and link libraries (-dev) with the shared
# libraries they load at run time, and those libraries' own needs that a plain
# Ubuntu or Debian image may lack (OpenCV core: TBB, BLAS/LAPACK, GLX).
packages=(
  libyaml-cpp-dev libyaml-cpp0.7
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  nlohmann-json3-dev libcli11-dev
  libopencv-core-dev libopencv-core406 libtbb12 libblas3 liblapack3 libgfortran5 libquadmath0
  libglx0 libglvnd0 libx11-6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0
  zlib1g-dev
  libbenchmark-dev libbenchmark1debian
  libsentencepiece-dev libsentencepiece0
  libgtest-dev libgmock-dev
  pkgconf pkgconf-bin libpkgconf3
)

mkdir -p .gpu-deps/debs
cd .gpu-deps/debs
rm -f ./*.deb
# apt-get download writes into the current folder; as root it warns that the
# _apt user cannot write here, which is harmless.
apt-get download "${packages[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
missing=0
for p in "${packages[@]}"; do
  ls "${p}"_*.deb >/dev/null 2>&1 || { echo "gpu_deps: failed to download ${p}" >&2; missing=1; }
done
[ "$missing" = 0 ] || exit 1
echo "gpu_deps: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in .gpu-deps/debs"
