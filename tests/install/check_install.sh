#!/usr/bin/env bash
# ctest Install.ExamplesBuildAgainstAnInstall: installs this build into a fresh prefix, then builds
# examples/embed against that prefix twice, with CMake (find_package(hanpu) and hanpu::hanpu) and with nothing
# but `pkg-config hanpu`, and runs each program (each exits 1 when the engine is off the exact bar, or the error
# contract does not hold). Also checks the installed CLI's version.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR WORK_DIR LIBDIR GENERATOR C_COMPILER CXX_COMPILER VERSION
set -euo pipefail
build=$1 src=$2 work=$3 libdir=$4 generator=$5 cc=$6 cxx=$7 version=$8
rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
cli_version=$("$prefix/bin/hanpu" --version)
[[ "$cli_version" == "$version" ]] || { echo "installed CLI says '$cli_version', expected '$version'" >&2; exit 1; }

echo "== CMake: find_package(hanpu $version) =="
cmake -S "$src/examples/embed" -B "$work/cmake" -G "$generator" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log"
cmake --build "$work/cmake" -j 2 >"$work/build.log"
"$work/cmake/gdn_prefill"
"$work/cmake/gdn_varlen_c"

echo "== pkg-config hanpu, a C compiler alone =="
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
pc_version=$(pkg-config --modversion hanpu)
[[ "$pc_version" == "$version" ]] || { echo "pkg-config says version '$pc_version', expected '$version'" >&2; exit 1; }
# shellcheck disable=SC2046  # pkg-config's flags are meant to be split
"$cc" -std=c99 -Wall -Wextra -Werror "$src/examples/embed/gdn_varlen.c" $(pkg-config --cflags --libs hanpu) \
  -o "$work/gdn_varlen_pc"
"$work/gdn_varlen_pc"
