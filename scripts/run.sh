#!/usr/bin/env bash
# The main job on built-in defaults: install what is missing, build, and run `hanpu verify`
# (360 random GDN/KDA instances, chunk and recurrent paths against the fp64 reference).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build/hanpu verify --json build/verify.json "$@"
