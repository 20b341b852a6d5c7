#!/usr/bin/env bash
# Records runs of a model on this machine for `lathe calibrate` (one JSON object per
# line), then calibrates a hardware spec against them and prints the per-phase error
# on the held-out runs before and after.
# Usage: [REPEAT=3] [PASSES=2] bench/calibrate_runs.sh [LATHE] [MODEL] [HW] [OUT_DIR]
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
# The whole list is recorded PASSES times, one process per run each time, and each
# phase of a run keeps the pass where it was fastest (with its kernels): the host's
# slow spells last seconds to minutes, longer than one process, so best-of within a
# process does not escape them.
PASSES=${PASSES:-2}
mkdir -p "$OUT"
runs="$OUT/runs.jsonl"
compact() { python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), separators=(",", ":")))'; }
for pass in $(seq 1 "$PASSES"); do
  : >"$OUT/runs-pass$pass.jsonl"
  # Weight formats x prompt lengths x batch sizes, interleaved so that every third run
  # (the held-out set of `lathe calibrate --holdout 3`) spans formats and shapes, and
  # the fitted runs hold batch 1 and batch 2 of every format (a GEMV's cost per row is
  # fitted only from runs with more than one row).
  for spec in "f32 32 1" "int8 96 1" "q8_0 64 2" "int4:g32 128 1" \
              "f32 128 2" "int8 32 2" "q8_0 128 1" "int4:g32 64 2" \
              "f32 64 1" "int8 64 2" "q8_0 32 2" "int4:g32 96 1"; do
    set -- $spec
    "$LATHE" run "$MODEL" --weights "$1" --prompt-tokens "$2" --batch "$3" --gen 24 --hw "$HW" --per-op --format json \
      --repeat "$REPEAT" |
      compact >>"$OUT/runs-pass$pass.jsonl"
    echo "pass $pass/$PASSES: recorded $MODEL --weights $1 --prompt-tokens $2 --batch $3" >&2
  done
done
# Per run and phase, the fastest pass: its phase time and its kernels of that phase.
pass_files=()
for pass in $(seq 1 "$PASSES"); do pass_files+=("$OUT/runs-pass$pass.jsonl"); done
python3 - "$runs" "${pass_files[@]}" <<'PY'
import json, sys
out, passes = sys.argv[1], [[json.loads(l) for l in open(p)] for p in sys.argv[2:]]
if len({len(p) for p in passes}) != 1:
    sys.exit("calibrate_runs.sh: the passes recorded different numbers of runs")
with open(out, "w") as f:
    for recs in zip(*passes):
        best = dict(recs[0])
        for phase in ("prefill", "decode"):
            src = min(recs, key=lambda r: r[phase + "_ms"])
            best[phase + "_ms"] = src[phase + "_ms"]
            best["kernels"] = [k for k in best["kernels"] if k["phase"] != phase] + \
                              [k for k in src["kernels"] if k["phase"] == phase]
        # The figures derived from the two phase times, and a note of the merge (the
        # record's other fields, such as "repeat", are the first pass's).
        for phase, rate in (("prefill", "prefill_tokens_per_s"), ("decode", "decode_tokens_per_s")):
            if best.get(rate) and recs[0][phase + "_ms"] > 0:
                best[rate] = recs[0][rate] * recs[0][phase + "_ms"] / best[phase + "_ms"]
        best["ttft_ms"] = best["prefill_ms"]
        best["e2e_ms"] = best["prefill_ms"] + best["decode_ms"]
        if best.get("decode_steps"):
            best["tpot_ms"] = best["decode_ms"] / best["decode_steps"]
        best["merged_passes"] = len(recs)
        f.write(json.dumps(best, separators=(",", ":")) + "\n")
PY
name=$(basename "$HW" .toml)  # HW may be a built-in name or a spec file (lathe probe -o)
"$LATHE" calibrate "$runs" --hw "$HW" -o "$OUT/$name-calibrated.toml"
