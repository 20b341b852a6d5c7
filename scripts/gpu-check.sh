#!/usr/bin/env bash
# The CUDA backend on a GPU in one go (issue 6): builds, runs the GPU tests (CTest
# label `gpu`), measures the device's ceilings, times decode (bf16, int8, int4) and
# prefill of 2048 tokens for a Llama-3-8B-shaped model with synthetic weights, and
# prints one table (also written to $OUT/gpu-check.md). Meant to finish in under five
# minutes on one H100/H200-class GPU. Logs and JSON go to $OUT (default: a temp dir).
#
#   scripts/gpu-check.sh            # all of it
#   SKIP_TESTS=1 scripts/gpu-check.sh   # only the measurements
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d /tmp/lathe-gpu-check.XXXX)}
BUILD=${LATHE_BUILD_DIR:-build}
mkdir -p "$OUT"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
  --format=csv >"$OUT/nvidia-smi.csv" 2>&1
start=$(date +%s)
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/configure.log" 2>&1 \
    || { tail -20 "$OUT/configure.log"; exit 1; }
fi
cmake --build "$BUILD" -j "$(nproc)" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "gpu-check: built in $(( $(date +%s) - start )) s" >&2
LATHE=$BUILD/cli/lathe
"$LATHE" probe --backend cuda --format json >/dev/null 2>"$OUT/device.err" \
  || { echo "gpu-check: $(cat "$OUT/device.err")"; exit 2; }

tests_rc=0
if [ -z "${SKIP_TESTS:-}" ]; then
  rm -f "$OUT/gpu-tests.csv"
  (cd "$BUILD" && LATHE_GPU_REPORT="$OUT/gpu-tests.csv" ctest -L gpu --output-on-failure -j 4) \
    >"$OUT/gpu-tests.log" 2>&1 || tests_rc=$?
  grep -E "tests passed|tests failed" "$OUT/gpu-tests.log" >&2
  echo "gpu-check: GPU tests done at $(( $(date +%s) - start )) s" >&2
fi
python3 bench/gpu_check.py --lathe "$LATHE" --out "$OUT" --report "$OUT/gpu-tests.csv" || exit 1
echo "gpu-check: finished in $(( $(date +%s) - start )) s; logs in $OUT" >&2
exit $tests_rc
