#!/usr/bin/env bash
# Speed of the serving simulator: a one-hour stream at 10 requests/s (about 36,000
# requests) for Llama-3-8B on one H100 (the built-in serve-chat scenario), under each
# batching policy. Prints, per policy, the median over REPS runs of the whole command
# (plan lowering, stream generation, simulation, output) and of the simulation alone
# (the `wall_s` the command reports), with the step count.
# Usage: bench/serve_bench.sh [path/to/lathe] [REPS]   (not run by CI)
set -euo pipefail
LATHE=${1:-build/cli/lathe}
REPS=${2:-5}
[ -x "$LATHE" ] || { echo "no lathe binary at $LATHE (build first, or pass its path)" >&2; exit 2; }
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); $(date -u +%Y-%m-%d)"
printf '%-11s %9s %8s %12s %14s\n' policy requests steps "command s" "simulation s"
for policy in continuous chunked dynamic static; do
  best=$(for i in $(seq "$REPS"); do
    start=$(date +%s.%N)
    out=$("$LATHE" serve-sim --scenario serve-chat --batching "$policy" --format json)
    end=$(date +%s.%N)
    python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($end-$start, d['wall_s'], d['requests'], d['steps'])" "$out"
  done | sort -n | python3 -c "
import sys
rows = [list(map(float, l.split())) for l in sys.stdin]
mid = len(rows) // 2
cmd = sorted(r[0] for r in rows)[mid]; sim = sorted(r[1] for r in rows)[mid]
print(f'{cmd:.3f} {sim:.3f} {int(rows[0][2])} {int(rows[0][3])}')")
  read -r c s n k <<<"$best"
  printf '%-11s %9s %8s %12s %14s\n' "$policy" "$n" "$k" "$c" "$s"
done
