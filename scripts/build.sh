#!/usr/bin/env bash
# Configures and builds hanpu. Usage: scripts/build.sh [--sanitize] (ASan+UBSan build in build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DHANPU_SANITIZE=ON)
fi
cmake -S . -B "$dir" -G Ninja "${flags[@]}" > /dev/null
cmake --build "$dir" -j 2
