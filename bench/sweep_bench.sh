#!/usr/bin/env bash
# Plans simulated per second by `lathe sweep` on the 107,520-point Llama-3-8B sweep
# (bench/sweeps/llama3-8b-100k.toml), on 1 and 2 threads, rows written to a CSV.
# Prints a markdown table of medians over REPS runs (docs/performance.md).
# Usage: bench/sweep_bench.sh [LATHE] [REPS]
set -euo pipefail
LATHE=${1:-build/cli/lathe}
REPS=${2:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
SWEEP="$HERE/sweeps/llama3-8b-100k.toml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| threads | plans | shapes lowered (s) | costing (s) | whole command (s) | plans/s (costing) | plans/s (whole command) |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for threads in 1 2; do
  for i in $(seq "$REPS"); do
    start=$(date +%s.%N)
    "$LATHE" sweep "$SWEEP" --threads "$threads" -o "$tmp/rows.csv" --format json >"$tmp/s$i.json"
    end=$(date +%s.%N)
    python3 -c "import json; d=json.load(open('$tmp/s$i.json')); print(d['evaluated'], d['lower_s'], d['cost_s'], $end - $start)" >>"$tmp/t$threads"
  done
  python3 - "$tmp/t$threads" "$threads" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
n = rows[0][0]
low, cost, wall = (statistics.median(r[i] for r in rows) for i in (1, 2, 3))
print(f"| {sys.argv[2]} | {int(n):,} | {low:.3f} | {cost:.3f} | {wall:.3f} | {n / cost:,.0f} | {n / wall:,.0f} |")
PY
done
