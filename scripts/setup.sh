#!/usr/bin/env bash
# Installs the Debian 12 packages hanpu builds with, when any is missing. Safe to run repeatedly.
set -euo pipefail
source "$(dirname "$0")/lib/apt-ensure.sh"
apt_ensure g++ cmake ninja-build pkg-config libgtest-dev nlohmann-json3-dev libcli11-dev libhwy-dev libdnnl-dev python3-dev python3-venv
