#!/usr/bin/env bash
# Builds and runs every test: the C++ suite (ctest), then the Python package's (pytest, through
# scripts/test-python.sh). Usage: scripts/test.sh [--sanitize]: the C++ suite alone under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh "$@"
dir=build
[ "${1:-}" = "--sanitize" ] && dir=build-asan
ctest --test-dir "$dir" --output-on-failure -j 2
[ "${1:-}" = "--sanitize" ] || scripts/test-python.sh
