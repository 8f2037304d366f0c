#!/usr/bin/env bash
# Configures and builds hanpu. Usage: scripts/build.sh [--sanitize | --tsan]: an ASan+UBSan build in
# build-asan/, or a ThreadSanitizer build in build-tsan/.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)
case "${1:-}" in
  --sanitize) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DHANPU_SANITIZE=ON) ;;
  --tsan) dir=build-tsan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DHANPU_TSAN=ON) ;;
esac
cmake -S . -B "$dir" -G Ninja "${flags[@]}" > /dev/null
cmake --build "$dir" -j 2
