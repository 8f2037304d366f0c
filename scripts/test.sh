#!/usr/bin/env bash
# Builds and runs every test. Usage: scripts/test.sh [--sanitize] (ASan+UBSan build of the same tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh "$@"
dir=build
[ "${1:-}" = "--sanitize" ] && dir=build-asan
ctest --test-dir "$dir" --output-on-failure -j 2
