#!/usr/bin/env bash
# Fuzzes every reader of outside files with libFuzzer (clang, ASan + UBSan inside): safetensors, plan JSON,
# device JSON, fusion task specs, fusion stream files (tests/fuzz/targets.h), and the command line's argument
# parsing (tests/fuzz/fuzz_cli.cpp). Usage:
#   scripts/fuzz.sh [--seconds N] [TARGET...]     (default 30 s per target, all targets)
# Seeds: tests/fuzz/corpus/TARGET (and devices/ for the device reader), dictionaries tests/fuzz/*.dict.
# New inputs go to a scratch corpus under build-fuzz/; a crash, leak or timeout stops the script with a
# non-zero exit and leaves the input in build-fuzz/artifacts/ — copy it to tests/fuzz/regressions/TARGET/
# once fixed, where the test suite replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=30
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(safetensors plan device fuse_spec stream cli)
source scripts/lib/apt-ensure.sh
apt_ensure clang-14 libfuzzer-14-dev cmake ninja-build libhwy-dev nlohmann-json3-dev libcli11-dev
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DHANPU_FUZZ=ON -DHANPU_BUILD_CLI=OFF -DHANPU_BUILD_TESTS=OFF > /dev/null
cmake --build build-fuzz -j 2 --target $(printf 'fuzz_%s ' "${targets[@]}")
mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  dict=tests/fuzz/json.dict
  case "$t" in
    safetensors) dict=tests/fuzz/safetensors.dict ;; fuse_spec|stream) dict=tests/fuzz/fuse.dict ;; cli) dict=tests/fuzz/cli.dict ;;
  esac
  seeds=(tests/fuzz/corpus/"$t")
  [ "$t" = device ] && seeds=(devices)
  [ "$t" = stream ] && seeds+=(examples)
  work=build-fuzz/corpus/"$t"
  mkdir -p "$work"
  echo "== fuzz_$t for ${seconds} s"
  log=build-fuzz/fuzz_"$t".log
  status=0
  build-fuzz/fuzz_"$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -dict="$dict" \
    -artifact_prefix=build-fuzz/artifacts/"$t"- -print_final_stats=1 "$work" "${seeds[@]}" > "$log" 2>&1 || status=$?
  grep -E "^stat::(number_of_executed_units|new_units_added|peak_rss_mb)|ERROR|SUMMARY|Test unit written" "$log" || true
  # A crash, leak, timeout or a failure to start (a bad dictionary, say) is a non-zero exit.
  if [ "$status" -ne 0 ] || ! grep -q "^stat::number_of_executed_units" "$log"; then
    tail -n 40 "$log" >&2
    echo "fuzz_$t failed (exit $status); input, if any: $(ls build-fuzz/artifacts/"$t"-* 2> /dev/null)" >&2
    exit 1
  fi
done
echo "fuzzing passed: ${#targets[@]} targets, ${seconds} s each"
