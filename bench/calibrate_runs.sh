#!/usr/bin/env bash
# Records runs of a model on this machine for `lathe calibrate` (one JSON object per
# line), then calibrates a hardware spec against them and prints the per-phase error
# on the held-out runs before and after.
# Usage: [REPEAT=3] bench/calibrate_runs.sh [LATHE] [MODEL] [HW] [OUT_DIR]
#   e.g. bench/calibrate_runs.sh build/cli/lathe small cpu-host /tmp/calib
#        bench/calibrate_runs.sh build/cli/lathe small my-host.toml /tmp/calib  (from lathe probe -o)
set -euo pipefail
LATHE=${1:-build/cli/lathe}
MODEL=${2:-small}
HW=${3:-cpu-host}
OUT=${4:-calibration}
# Each run is the best of REPEAT passes (lathe run --repeat): on a shared host single
# passes of the same run vary several-fold.
REPEAT=${REPEAT:-3}
mkdir -p "$OUT"
runs="$OUT/runs.jsonl"
: >"$runs"
compact() { python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), separators=(",", ":")))'; }
# Weight formats x prompt lengths x batch sizes, interleaved so that every third run
# (the held-out set of `lathe calibrate --holdout 3`) spans formats and shapes.
for spec in "f32 32 1" "int8 96 1" "q8_0 64 2" "int4:g32 128 1" \
            "f32 128 2" "int8 32 2" "q8_0 128 1" "int4:g32 64 2" \
            "f32 64 1" "int8 128 1" "q8_0 32 1" "int4:g32 96 1"; do
  set -- $spec
  "$LATHE" run "$MODEL" --weights "$1" --prompt-tokens "$2" --batch "$3" --gen 24 --hw "$HW" --per-op --format json \
    --repeat "$REPEAT" |
    compact >>"$runs"
  echo "recorded $MODEL --weights $1 --prompt-tokens $2 --batch $3" >&2
done
name=$(basename "$HW" .toml)  # HW may be a built-in name or a spec file (lathe probe -o)
"$LATHE" calibrate "$runs" --hw "$HW" -o "$OUT/$name-calibrated.toml"
