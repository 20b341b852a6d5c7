#!/usr/bin/env bash
# The CUDA backend on a GPU in one go (issue 6): builds, runs the GPU tests (the
# cuda_backend_tests binary, CTest label `gpu`, in parallel shards), measures the
# device's ceilings, times decode (bf16, int8, int4) and prefill of 2048 tokens for a
# Llama-3-8B-shaped model with synthetic weights, runs `lathe tune --backend cuda` on
# it (issue 8), and prints one table (also written to $OUT/gpu-check.md). On an H200
# with 16 CPU cores it took 229-280 s in all: GPU tests about 50-60 s, the tuning
# 25-37 s a weight format (TUNE_FORMATS= skips it); the batched-decode rows added since
# are three more runs of about 12 s each (estimate). Logs and JSON go to $OUT (default:
# a temp dir), at most eight files: gpu-check.md, gpu-tests.log, gpu-tests.csv,
# runs.log, runs.json, probe.toml, nvidia-smi.csv; gpu-check.md and runs.json are
# rewritten after every lathe call, so a run stopped at a time limit keeps what it
# finished.
#
#   scripts/gpu-check.sh                 # all of it
#   SKIP_TESTS=1 scripts/gpu-check.sh    # only the measurements
#   SKIP_BUILD=1 LATHE=path/lathe LATHE_GPU_TESTS=path/cuda_backend_tests scripts/gpu-check.sh
#                                        # prebuilt binaries (a machine without the build deps)
#   GPU_TEST_SHARDS=N                    # test processes side by side (default: nproc, at most 16)
#   TUNE_TIMEOUT=S                       # seconds each `lathe tune` may take (default 600)
#   TUNE_FORMATS=bf16                    # weight formats `lathe tune --backend cuda` tunes at the
#                                        # end (default bf16,int4:g128; empty: no tuning)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d /tmp/lathe-gpu-check.XXXX)}
BUILD=${LATHE_BUILD_DIR:-build}
LATHE=${LATHE:-$BUILD/cli/lathe}
TESTS=${LATHE_GPU_TESTS:-$BUILD/tests/cuda_backend_tests}
mkdir -p "$OUT"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
  --format=csv >"$OUT/nvidia-smi.csv" 2>&1
start=$(date +%s)
if [ -z "${SKIP_BUILD:-}" ]; then
  if [ ! -f "$BUILD/build.ninja" ]; then
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/gpu-tests.log" 2>&1 \
      || { tail -20 "$OUT/gpu-tests.log"; exit 1; }
  fi
  cmake --build "$BUILD" -j "$(nproc)" --target lathe cuda_backend_tests >"$OUT/gpu-tests.log" 2>&1 \
    || { tail -30 "$OUT/gpu-tests.log"; exit 1; }
  echo "gpu-check: built in $(( $(date +%s) - start )) s" >&2
fi
"$LATHE" probe --backend cuda --format json >/dev/null 2>"$OUT/runs.log" \
  || { echo "gpu-check: $(cat "$OUT/runs.log")"; exit 2; }

tests_rc=0
if [ -z "${SKIP_TESTS:-}" ]; then
  # gtest's own sharding: each process runs every Nth case; kernels compile once per
  # process (NVRTC's disk cache is shared, written atomically).
  n=${GPU_TEST_SHARDS:-$(nproc)}
  [ "$n" -gt 16 ] && n=16
  rm -f "$OUT/gpu-tests.csv"
  pids=()
  for ((i = 0; i < n; i++)); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i LATHE_GPU_REPORT="$OUT/gpu-tests.csv" \
      timeout "${GPU_TEST_TIMEOUT:-600}" "$TESTS" --gtest_brief=1 >"$OUT/gpu-tests.$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < n; i++)); do
    wait "${pids[$i]}" || tests_rc=1
  done
  for ((i = 0; i < n; i++)); do
    echo "=== shard $i of $n"
    cat "$OUT/gpu-tests.$i.log"
    rm -f "$OUT/gpu-tests.$i.log"
  done >>"$OUT/gpu-tests.log"
  passed=$(grep -ho "PASSED.*\] [0-9]* test" "$OUT/gpu-tests.log" | grep -o "[0-9]* test" | awk '{s += $1} END {print s + 0}')
  failed=$(grep "^\[  FAILED  \] [A-Za-z]" "$OUT/gpu-tests.log" | sed 's/ (.*//' | sort -u | wc -l)
  echo "gpu-check: GPU tests: $passed passed, $failed failed (exit $tests_rc) in $(( $(date +%s) - start )) s" >&2
fi
python3 bench/gpu_check.py --lathe "$LATHE" --out "$OUT" --report "$OUT/gpu-tests.csv" \
  --tune-formats "${TUNE_FORMATS-bf16,int4:g128}" --tune-timeout "${TUNE_TIMEOUT:-600}"
py_rc=$?
echo "gpu-check: finished in $(( $(date +%s) - start )) s; logs in $OUT" >&2
[ $tests_rc -ne 0 ] && exit $tests_rc
exit $py_rc
