#!/usr/bin/env bash
# Builds and runs every test: the C++ suite (ctest), then the Python package's (pytest, through
# scripts/test-python.sh). Usage: scripts/test.sh [--sanitize | --tsan]: the C++ suite alone under
# ASan+UBSan, or the tests that run threads (engine, pool, decode, concurrent callers, fusion host
# executors, plans, whole layers) under ThreadSanitizer. (The layers' projections run inside oneDNN, which is
# not instrumented, on hanpu's pool: ThreadSanitizer checks hanpu's own threads around them.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh "$@"
# The tests plan on the shipped host description, never on a calibration this machine holds (`hanpu
# calibrate` writes ~/.cache/hanpu/host.json): a path that does not exist selects the shipped default.
export HANPU_HOST_DEVICE="$PWD/build/no-calibration/host.json"
case "${1:-}" in
  --sanitize) ctest --test-dir build-asan --output-on-failure -j 2 ;;
  --tsan)
    # Not the bf16 drift test: its time is the single-threaded fp64 reference at T = 65536 (147 s under
    # ThreadSanitizer on the AMD EPYC Zen 5, against 7 s plain), and the other Engine tests run the same threads.
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
      ctest --test-dir build-tsan --output-on-failure -j 2 -E 'DoesNotDriftOverALongSequence' \
        -R '^(Concurrency|ThreadPool|Engine|FuseHost|FuseCore|PlanExec|Packing|Mapping|FpMode|Layer/LayerArchTest)\.' ;;
  *)
    ctest --test-dir build --output-on-failure -j 2
    scripts/test-python.sh ;;
esac
