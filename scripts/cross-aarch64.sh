#!/usr/bin/env bash
# Cross-builds hanpu for aarch64 (NEON; Highway's runtime dispatch on Arm) and runs the test suite under
# qemu-user. Installs Debian's cross toolchain, qemu-user and the arm64 builds of the libraries
# (multiarch) when missing. Usage: scripts/cross-aarch64.sh [ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/apt-ensure.sh
# With arm64 newly added its packages are missing, so apt_ensure refreshes the package lists.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  if [ "$(id -u)" -eq 0 ]; then dpkg --add-architecture arm64; else sudo dpkg --add-architecture arm64; fi
fi
apt_ensure g++-aarch64-linux-gnu qemu-user ninja-build cmake nlohmann-json3-dev libcli11-dev libhwy-dev:arm64 \
  libgtest-dev:arm64 libdnnl2:arm64
# Debian's libdnnl-dev cannot be installed for two architectures at once (their dnnl_config.h differ), so the
# arm64 headers, CMake files and library links are unpacked into the build folder instead.
deps=build-aarch64/deps
if [ ! -f "$deps/usr/lib/aarch64-linux-gnu/cmake/dnnl/dnnl-config.cmake" ]; then
  mkdir -p "$deps"
  (cd "$deps" && apt-get download libdnnl-dev:arm64 libdnnl2:arm64 && for f in *.deb; do dpkg-deb -x "$f" .; done)
fi
cmake -S . -B build-aarch64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -Ddnnl_DIR="$PWD/$deps/usr/lib/aarch64-linux-gnu/cmake/dnnl" \
  > /dev/null
cmake --build build-aarch64 -j 2
aarch64-linux-gnu-readelf -h build-aarch64/hanpu | grep -q AArch64 ||
  { echo "cross-aarch64: build-aarch64/hanpu is not an aarch64 binary"; exit 1; }
qemu-aarch64 build-aarch64/hanpu verify --instances 72 --quiet
ctest --test-dir build-aarch64 --output-on-failure -j 2 "$@"
