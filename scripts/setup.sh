#!/usr/bin/env bash
# Installs the Debian 12 packages hanpu builds with, when any is missing. Safe to run repeatedly.
set -euo pipefail
packages=(g++ cmake ninja-build libgtest-dev nlohmann-json3-dev libcli11-dev libhwy-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
