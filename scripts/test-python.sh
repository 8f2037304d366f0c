#!/usr/bin/env bash
# Builds and installs the Python package into .venv with `pip install .` (the way users install it),
# then runs its pytest suite (python/tests) against the installed copy.
# Usage: scripts/test-python.sh [pytest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
venv=.venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r python/requirements-test.txt
echo "== pip install . (builds the C++ extension)" >&2
CMAKE_BUILD_PARALLEL_LEVEL=2 "$venv/bin/python" -m pip install --quiet --disable-pip-version-check .
# From python/tests, `import hanpu` finds the installed package, not the source folder.
cd python/tests
HANPU_REQUIRE_FLA=1 "../../$venv/bin/python" -m pytest -q "$@"
