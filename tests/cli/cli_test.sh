#!/usr/bin/env bash
# The command-line contract: exit codes, located errors, --help everywhere.
# Usage: cli_test.sh PATH/TO/lathe
set -u
LATHE=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/common.sh"

expect_rc 0 "$LATHE" --help
# Every subcommand the top-level help lists (CLI11 spells the heading "Subcommands:" or
# "SUBCOMMANDS:"); each one's --help goes through main's path that registers only it.
cmds=$("$LATHE" --help | awk 'tolower($0) ~ /^subcommands:/{s=1;next} s&&NF{print $1}')
[ "$(echo $cmds | wc -w)" -ge 19 ] || bad "top-level --help lists too few subcommands: $cmds"
for c in $cmds; do
  expect_rc 0 "$LATHE" "$c" --help
  grep -q "Usage" "$tmp/out" || bad "$c --help prints no usage"
done
expect_rc 2 "$LATHE" no-such-command
expect_rc 2 "$LATHE" graph
expect_rc 2 "$LATHE" graph llama-3-8b --phase middle
expect_rc 2 "$LATHE" graph llama-3-8b --batch 0
expect_rc 2 "$LATHE" graph no-such-model
grep -q "built-in models" "$tmp/err" || bad "unknown model does not list built-ins"

expect_rc 0 "$LATHE" specs
for n in llama-3-8b mixtral-8x7b tiny small h100-sxm cpu-host jetson-agx-orin-64g; do
  grep -q -- "$n" "$tmp/out" || bad "specs lacks $n"
done
expect_rc 0 "$LATHE" specs --format json
python3 -c "import json,sys; d=json.load(open('$tmp/out')); assert len(d['models'])>=7 and len(d['hardware'])>=8" || bad "specs json"

expect_rc 0 "$LATHE" check llama-3-8b
grep -q "8,030,261,248" "$tmp/out" || bad "check llama-3-8b parameter count"
# RoPE scaling is shown (text) and given with its divisors (JSON).
expect_rc 0 "$LATHE" check "$SRC/tests/fixtures/rope-llama3.toml"
grep -q "llama3 scaling x8 (original context 16" "$tmp/out" || bad "check does not show RoPE scaling: $(cat "$tmp/out")"
expect_rc 0 "$LATHE" check "$SRC/tests/fixtures/rope-llama3.toml" --format json
python3 -c "import json; r=json.load(open('$tmp/out'))['rope_scaling']; assert r['type']=='llama3' and len(r['divisors'])==16 and r['divisors'][-1]==8.0" || bad "check json rope_scaling"
expect_rc 0 "$LATHE" check h200

printf '[model]\nname = "x"\nhidden = 4096\nlayers = -3\nheads = 7\n' >"$tmp/bad.toml"
expect_rc 2 "$LATHE" check "$tmp/bad.toml"
grep -q "bad.toml:4:" "$tmp/err" || bad "bad spec error lacks file:line: $(cat "$tmp/err")"
printf 'not toml [[[' >"$tmp/syntax.toml"
expect_rc 2 "$LATHE" check "$tmp/syntax.toml"
expect_rc 2 "$LATHE" check "$tmp/missing.toml"
printf '[plan]\nmodel = "llama-3-8b"\nweights = "int4:g64"\n[plan.workload]\nbatch = 2\n' >"$tmp/plan.toml"
expect_rc 0 "$LATHE" check "$tmp/plan.toml"
printf '[plan]\nmodel = "no-model"\n' >"$tmp/plan2.toml"
expect_rc 2 "$LATHE" check "$tmp/plan2.toml"

expect_rc 0 "$LATHE" graph llama-3-8b --phase decode
grep -q "node l31.w_down = matmul" "$tmp/out" || bad "decode graph lacks the last layer"
expect_rc 0 "$LATHE" graph mixtral-8x7b --phase prefill --format dot
head -1 "$tmp/out" | grep -q "^digraph" || bad "dot output"
if command -v dot >/dev/null; then
  dot -Tsvg "$tmp/out" -o "$tmp/g.svg" 2>"$tmp/doterr" || bad "graphviz rejects our dot: $(head -3 "$tmp/doterr")"
fi
expect_rc 2 "$LATHE" graph llama-3-8b --prompt 100 --context 50
# Sizes that would overflow 64-bit element counts are refused (the KV cache was negative and "fit").
expect_rc 2 "$LATHE" simulate llama-2-7b h200 --batch 1048576 --prompt 16777216 --gen 16777216
grep -q "is too large to cost" "$tmp/err" || bad "an overflowing workload: $(cat "$tmp/err")"
# A format or layout asked for with the pass that applies it left out is refused (it was dropped).
expect_rc 2 "$LATHE" simulate llama-3-8b h100-sxm --passes none --weights int4:g32
grep -q "weights int4:g32 needs the quantize-weights pass" "$tmp/err" || bad "--weights without its pass: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate llama-3-8b h100-sxm --no-pass quantize-kv --kv int8
expect_rc 2 "$LATHE" simulate llama-3-8b h100-sxm --no-pass kv-layout --kv-layout LTHD
expect_rc 0 "$LATHE" simulate llama-3-8b h100-sxm --passes none --weights bf16
expect_rc 2 "$LATHE" graph tiny --phase prefill --prompt 4 --context 5
grep -q "prefill has none" "$tmp/err" || bad "graph --context in prefill: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" graph tiny --phase prefill --prompt 300
grep -q "exceeds tiny's max_context (256)" "$tmp/err" || bad "graph past max_context does not warn: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" weights init tiny -o "$tmp/seed.gguf" --seed 99999999999999999999999
grep -q "at most 18446744073709551615" "$tmp/err" || bad "--seed overflow: $(cat "$tmp/err")"
# check lowers a plan as the commands would, and takes hardware overrides as they do.
printf '[plan]\nmodel = "tiny"\nhardware = "h100-sxm+memory_gb=40"\ntp = 3\n' >"$tmp/tp3.toml"
expect_rc 2 "$LATHE" check "$tmp/tp3.toml"
grep -q "tp3.toml: tiny: cannot split over tp=3 devices" "$tmp/err" || bad "check of a tp-3 plan: $(cat "$tmp/err")"
printf '[plan]\nmodel = "llama-3-70b"\nhardware = "a100-80g"\ntp = 4\n[plan.workload]\nbatch = 512\nprompt = 4096\n' >"$tmp/oom.toml"
expect_rc 0 "$LATHE" check "$tmp/oom.toml"
grep -q "warning: batch 512 does not fit on a100-80g" "$tmp/err" || bad "check of a plan that does not fit: $(cat "$tmp/err")"
printf '[plan]\nmodel = "tiny"\nhardware = "h100-sxm+memory_gb=40"\npipeline = "fuse-qkv, fuse-qkvv"\n' >"$tmp/pipe.toml"
expect_rc 2 "$LATHE" check "$tmp/pipe.toml"
grep -q "pipe.toml:4:12: plan.pipeline: unknown pass 'fuse-qkvv' (did you mean 'fuse-qkv'?)" "$tmp/err" || bad "check of a pipeline typo: $(cat "$tmp/err")"
printf '[plan]\nmodel = "tiny"\nhardware = "h100-sxm+memory_gb=40"\n' >"$tmp/ovr.toml"
expect_rc 0 "$LATHE" check "$tmp/ovr.toml" --format json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['hardware'] == 'h100-sxm+memory_gb=40' and d['act'] == 'default', d" "$tmp/out" || bad "check plan json"
expect_rc 0 "$LATHE" check tiny --format json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert (d['layers'], d['hidden'], d['heads'], d['kv_heads'], d['vocab'], d['max_context']) == (2, 128, 4, 2, 512, 256), d" "$tmp/out" || bad "check model json lacks the model's fields"

# ---- simulate / whatif ----
expect_rc 0 "$LATHE" simulate llama-3-8b a100-80g --batch 1 --prompt 2048 --gen 128
grep -q "TPOT" "$tmp/out" || bad "simulate table lacks TPOT"
expect_rc 0 "$LATHE" simulate mixtral-8x7b h100-sxm --batch 8 --prompt 512 --gen 256 --weights int4:g128 --kv int8 --tp 2 --format json
python3 - "$tmp/out" <<'PY' || bad "simulate json schema"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("prefill_ms", "decode_ms", "tpot_ms", "ttft_ms", "e2e_ms", "tokens_per_s", "memory_bytes", "fits", "ops"):
    assert k in d, k
for k in ("weights", "kv", "activations", "total", "capacity"):
    assert k in d["memory_bytes"], k
assert isinstance(d["fits"], bool)
assert len(d["ops"]) > 10
for o in d["ops"]:
    for k in ("name", "phase", "flops", "bytes", "time_ms", "bound"):
        assert k in o, k
    assert o["phase"] in ("prefill", "decode") and o["bound"] in ("compute", "memory", "launch", "network")
assert abs(sum(o["time_ms"] for o in d["ops"] if o["phase"] == "prefill") - d["prefill_ms"]) < 1e-6 * d["prefill_ms"]
sh = d["prefill_time_shares"]
assert abs(sum(sh.values()) - 1) < 1e-6 and sh[d["prefill_bound"]] == max(sh.values()), sh
assert d["ideal"] is False and d["kv_layout_reason"] and d["decode_time_shares"] is not None
# Decode rows sum over every step (time_ms); step_time_ms is one step; shares add to 1.
assert abs(sum(o["time_ms"] for o in d["ops"] if o["phase"] == "decode") - d["decode_ms"]) < 1e-6 * d["decode_ms"]
assert abs(sum(o["step_time_ms"] for o in d["ops"] if o["phase"] == "decode") - d["tpot_ms"]) < 1e-3 * d["tpot_ms"]
for ph in ("prefill", "decode"):
    assert abs(sum(o["share"] for o in d["ops"] if o["phase"] == ph) - 1) < 1e-9, ph
PY
expect_rc 0 "$LATHE" simulate llama-3-8b jetson-agx-orin-64g --weights int4:g128 --per-op --plot "$tmp/r.svg" --trace "$tmp/t.json"
python3 -c "import xml.etree.ElementTree as E; r=E.parse('$tmp/r.svg').getroot(); assert r.tag.endswith('svg'); assert len(r.findall('.//{http://www.w3.org/2000/svg}circle')) > 3" || bad "roofline svg does not parse"
python3 -c "import json; d=json.load(open('$tmp/t.json')); ev=[e for e in d['traceEvents'] if e['ph']=='X']; assert len(ev) > 100 and all('flops' in e['args'] for e in ev)" || bad "trace json"
# The trace's timeline: on each thread every kernel starts where the one before ended
# (to the nanosecond), and the last one ends at the E2E time; args carry bytes and bound.
expect_rc 0 "$LATHE" simulate llama-3-8b jetson-agx-orin-64g --weights int4:g128 --format json
python3 - "$tmp/t.json" "$tmp/out" <<'PY' || bad "trace timeline"
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
e2e_us = json.load(open(sys.argv[2]))["e2e_ms"] * 1e3
end = 0.0
for tid in (1, 2):
    es = [e for e in ev if e["tid"] == tid]
    assert es, tid
    for a, b in zip(es, es[1:]):
        assert abs(a["ts"] + a["dur"] - b["ts"]) < 1.5e-3, (a, b)
    assert all(e["args"]["bound"] in ("compute", "memory", "launch", "network", "mixed") and e["args"]["bytes"] >= 0 for e in es)
    end = max(end, es[-1]["ts"] + es[-1]["dur"])
assert abs(end - e2e_us) < 1e-2, (end, e2e_us)
PY
# A run that fails leaves no output file: --trace into a path whose "directory" is a
# file is refused before the chart is written; one path for both files is refused.
rm -f "$tmp/keep.svg"; : >"$tmp/plainfile"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --plot "$tmp/keep.svg" --trace "$tmp/plainfile/t.json"
grep -q "is not a directory" "$tmp/err" || bad "trace under a file: $(cat "$tmp/err")"
[ ! -e "$tmp/keep.svg" ] || bad "a failed simulate left its --plot file behind"
# Without flash attention a huge workload's scores overflow 64-bit byte counts: an
# error, not the verifier's abort (exit 134).
expect_rc 2 "$LATHE" simulate tiny cpu-host --no-fusion --batch 65536 --prompt 4194304 --gen 2
grep -q "is too large to cost: its activations pass 2^61 bytes" "$tmp/err" || bad "huge unfused workload: $(cat "$tmp/err")"
# A timeline longer than int64 nanoseconds hold is refused (it wrote negative times).
expect_rc 2 "$LATHE" simulate tiny cpu-host --batch 65536 --prompt 16777216 --allow-oom --plot "$tmp/long.svg" --trace "$tmp/long.json"
grep -q "trace's nanosecond timestamps hold at most" "$tmp/err" || bad "a 974-year trace: $(cat "$tmp/err")"
[ ! -e "$tmp/long.json" ] && [ ! -e "$tmp/long.svg" ] || bad "a refused trace left a file"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --plot "$tmp/same.out" --trace "$tmp/./same.out"
[ ! -e "$tmp/same.out" ] || bad "--plot and --trace on one path wrote it"
expect_rc 0 "$LATHE" simulate llama-3-8b a100-80g --format csv
head -1 "$tmp/out" | grep -q "^phase,name,kernel" || bad "csv header"
printf '[hardware]\nname = "mygpu"\nkind = "gpu"\ncompute_capability = "9.0"\nsm_count = 100\nmemory_gb = 96\nhbm_bandwidth_gbs = 4000\n[hardware.peak_tflops]\nfp32 = 50\nbf16 = 800\n' >"$tmp/gpu.toml"
expect_rc 0 "$LATHE" simulate "$SRC/specs/models/llama-3-8b.toml" "$tmp/gpu.toml" --set hbm_bandwidth_gbs=6000 --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['hardware'].endswith('hbm_bandwidth_gbs=6000')" || bad "--set not applied"
expect_rc 0 "$LATHE" simulate llama-3-8b a100-80g --ideal
expect_rc 2 "$LATHE" simulate llama-3-8b no-such-gpu
grep -q "a100-80g" "$tmp/err" || bad "unknown hardware does not list built-ins"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --set bandwidth=3
grep -q "valid keys" "$tmp/err" || bad "bad --set key does not list valid keys"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --batch 0
grep -q -- "--batch: 0 is outside \[1, 1048576\]" "$tmp/err" || bad "--batch 0 message: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --batch abc
grep -q -- "--batch: 'abc' is not a number" "$tmp/err" || bad "--batch abc message: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --batch 1.5
grep -q -- "--batch: '1.5' is not a whole number" "$tmp/err" || bad "--batch 1.5 message: $(cat "$tmp/err")"
# CLI11 read C prefixes: --batch 010 was batch 8 (octal), 0x10 batch 16.
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --batch 010
grep -q -- "--batch: '010': write it without leading zeros" "$tmp/err" || bad "--batch 010 message: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --prompt 0x10
grep -q -- "--prompt: '0x10' is not a whole decimal number" "$tmp/err" || bad "--prompt 0x10 message: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" sweep batch-quant-llama3-8b-a100 --samples 0b11
# Integer lists are held to the same rule (whatif read '010' as 10, moe-sim took '6.4e1').
expect_rc 2 "$LATHE" whatif tiny --hw cpu-host --batch 1,010
grep -q -- "--batch: '010': write it without leading zeros" "$tmp/err" || bad "whatif --batch 1,010: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" moe-sim tiny-moe cpu-host --gpus 1 --batch 6.4e1
grep -q -- "--batch: '6.4e1' is not a whole decimal number in \[1, 1048576\]" "$tmp/err" || bad "moe-sim --batch 6.4e1: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" edge-sim --scenario edge-orin --beams 1,2.0
grep -q -- "--beams: '2.0' is not a whole decimal number in \[1, 64\]" "$tmp/err" || bad "edge-sim --beams 2.0: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" whatif tiny --hw cpu-host --batch 1,+2 --prompt 8 --gen 2
printf '[scenario]\nname = "b"\nkind = "moe"\nmodel = "tiny-moe"\nhardware = "cpu-host"\n[scenario.moe]\nbatches = [4, 4]\n' >"$tmp/moeb.toml"
expect_rc 2 "$LATHE" moe-sim --scenario "$tmp/moeb.toml"
grep -q "batches" "$tmp/err" || bad "moe scenario batches [4, 4]: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" moe-sim tiny-moe cpu-host --gpus 1 --batch 4,4
grep -q -- "--batch: '4' is given twice" "$tmp/err" || bad "moe-sim --batch 4,4: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --prompt -5
expect_rc 2 "$LATHE" simulate llama-3-70b a100-40g
grep -q "largest batch" "$tmp/err" || bad "OOM message lacks the largest batch"
# By how much, in the error and in the --allow-oom table.
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --batch 256 --prompt 2048
grep -q "needs 112.70 GB of 80.00 GB, 32.70 GB too much.*largest batch that fits at this context is 169" "$tmp/err" || bad "OOM error: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" simulate llama-3-8b a100-80g --batch 256 --prompt 2048 --allow-oom
grep -q "DOES NOT FIT: 32.697 GB too much; the largest batch that fits is 169" "$tmp/out" || bad "--allow-oom table lacks the shortfall"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --weights fp8
grep -q "sm_89" "$tmp/err" || bad "fp8 on A100 error"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --kv fp8
grep -q "KV fp8: a100-80g has no fp8 support (sm_80; fp8 needs sm_89 or newer)" "$tmp/err" || bad "fp8 KV on A100 error: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate llama-3-8b h100-sxm --weights fp8 --set peak_tflops.fp8=0
grep -q "(peak_tflops.fp8 is 0)" "$tmp/err" || bad "fp8 with a zero peak: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --weights int5
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --kv-layout XYZ
expect_rc 0 "$LATHE" whatif llama-3-8b --hw a100-80g,h100-sxm,h200,l4 --batch 1,16 --prompt 2048 --gen 128
grep -q "(x" "$tmp/out" || bad "whatif has no ratios"
expect_rc 0 "$LATHE" whatif llama-3-8b --hw "a100-80g,a100-80g+hbm_bandwidth_gbs=x2" --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert d[1]['tpot_ms'] < d[0]['tpot_ms']" || bad "whatif override"
# An override on the name beats --set (applied after it): x2 of --set's 1000 GB/s is
# simulate's 2000 GB/s, in the column and in the ratio to the first column.
expect_rc 0 "$LATHE" whatif llama-3-8b --hw "a100-80g,a100-80g+hbm_bandwidth_gbs=x2" --set hbm_bandwidth_gbs=1000 --format json
cp "$tmp/out" "$tmp/whatif.json"
expect_rc 0 "$LATHE" simulate llama-3-8b a100-80g --set hbm_bandwidth_gbs=2000 --format json
python3 -c "import json; w=json.load(open('$tmp/whatif.json')); s=json.load(open('$tmp/out')); assert w[1]['tpot_ms'] == s['tpot_ms'], (w[1]['tpot_ms'], s['tpot_ms']); assert w[1]['label'] == 'a100-80g+hbm_bandwidth_gbs=1000+hbm_bandwidth_gbs=x2', w[1]['label']" || bad "whatif: --set beat the column's own override"
expect_rc 0 "$LATHE" whatif llama-3-8b --hw "a100-80g,a100-80g+hbm_bandwidth_gbs=x2" --set hbm_bandwidth_gbs=1000
python3 - "$tmp/whatif.json" "$tmp/out" <<'PY' || bad "whatif ratios"
import json, re, sys
w = json.load(open(sys.argv[1]))
row = next(l for l in open(sys.argv[2]) if l.strip().startswith("TPOT ms"))
ratio = float(re.search(r"\(x([0-9.]+)\)", row).group(1))
assert abs(ratio - w[1]["tpot_ms"] / w[0]["tpot_ms"]) < 0.006, (ratio, row)
mb = next(l for l in open(sys.argv[2]) if l.strip().startswith("max batch"))
assert not re.search(r"\d\.\d", re.sub(r"\(x[0-9.]+\)", "", mb)), mb  # a count, not a decimal
PY
expect_rc 2 "$LATHE" whatif llama-3-8b --hw a100-80g --batch 1,x
expect_rc 2 "$LATHE" whatif llama-3-8b --hw a100-80g --prompt 99999999
expect_rc 2 "$LATHE" whatif llama-3-8b --hw "a100-80g+"
grep -q "empty override" "$tmp/err" || bad "a trailing '+' is not an error: $(cat "$tmp/err")"
# list flags: blanks around items are trimmed, an empty item is an error (it was dropped)
expect_rc 0 "$LATHE" whatif llama-3-8b --hw "a100-80g, h100-sxm" --batch "1, 4" --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert len(d) == 4, len(d)" || bad "whatif list with blanks"
expect_rc 2 "$LATHE" whatif llama-3-8b --hw a100-80g, --batch 1
grep -q "empty item" "$tmp/err" || bad "whatif --hw 'a100-80g,' not refused: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" whatif llama-3-8b --hw a100-80g --batch 1,,2
grep -q "^.*--batch: empty item" "$tmp/err" || bad "whatif --batch 1,,2 not refused: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" whatif llama-3-8b --hw a100-80g,cpu-host --format csv
python3 -c "
import csv; r = list(csv.DictReader(open('$tmp/out')))
assert [x['hardware'] for x in r] == ['a100-80g', 'cpu-host'] and [x['act'] for x in r] == ['bf16', 'f32'], r
assert float(r[1]['tpot_ms']) > float(r[0]['tpot_ms'])" || bad "whatif csv"
expect_rc 0 "$LATHE" whatif llama-3-8b --hw a100-80g,cpu-host
grep -q "options per column" "$tmp/out" || bad "whatif hides that the columns' options differ"
# A column whose target lacks a format is n/a with the reason; ratios are to the first
# column with figures. No column at all: the error, exit 2 (the whole table failed before).
expect_rc 0 "$LATHE" whatif llama-3-8b --hw a100-80g,h100-sxm,h200 --weights fp8
grep -q "ratios (xN) are to the h100-sxm column" "$tmp/out" || bad "whatif n/a: ratio base: $(cat "$tmp/out")"
grep -q "^  TPOT ms  *n/a  *[0-9.]*  *[0-9.]* (x0\.[0-9]*)" "$tmp/out" || bad "whatif n/a: TPOT row: $(cat "$tmp/out")"
grep -q "n/a (a100-80g): weights fp8: a100-80g has no fp8 support (sm_80" "$tmp/out" || bad "whatif n/a: no reason: $(cat "$tmp/out")"
expect_rc 0 "$LATHE" whatif llama-3-8b --hw a100-80g,h100-sxm --kv fp8 --format json
python3 -c "
import json; d = json.load(open('$tmp/out'))
assert 'KV fp8: a100-80g has no fp8 support' in d[0]['unsupported'] and 'tpot_ms' not in d[0], d[0]
assert 'unsupported' not in d[1] and d[1]['tpot_ms'] > 0, d[1]" || bad "whatif n/a json"
expect_rc 0 "$LATHE" whatif llama-3-8b --hw a100-80g,h100-sxm --kv fp8 --format csv
python3 -c "
import csv; r = list(csv.DictReader(open('$tmp/out')))
assert r[0]['tpot_ms'] == '' and 'sm_89' in r[0]['unsupported'] and r[1]['unsupported'] == '' and float(r[1]['tpot_ms']) > 0, r" || bad "whatif n/a csv"
expect_rc 2 "$LATHE" whatif llama-3-8b --hw a100-80g,a100-80g+hbm_bandwidth_gbs=x2 --weights fp8
grep -q "weights fp8: a100-80g has no fp8 support" "$tmp/err" || bad "whatif: no column runs: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" whatif llama-3-8b --hw a100-80g,h100-sxm+bogus=1 --kv fp8
grep -q "unknown hardware key 'bogus'" "$tmp/err" || bad "whatif: a bad override hidden by n/a: $(cat "$tmp/err")"
# Overrides that make a target unusable are errors, not inf/NaN figures.
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --set peak_tflops.bf16=0
grep -q "peak_tflops.bf16 is 0" "$tmp/err" || bad "bf16 peak 0: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" simulate llama-3-8b a100-80g --set peak_tflops.bf16=0 --act f16
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --set peak_tflops.bf16=1e-300
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --set sm_count=0.5
expect_rc 2 "$LATHE" simulate llama-3-8b a100-80g --tp 2 --set nvlink_gbs=0 --set pcie_gbs=0
grep -q "needs a link" "$tmp/err" || bad "tp without a link: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" simulate llama-3-8b a100-80g --set peak_tflops.bf16=100
grep -q "100 TFLOP/s bf16" "$tmp/out" || bad "the header does not show the overridden bf16 peak"
# A plan file names its model relative to itself.
mkdir -p "$tmp/rel"
sed 's/^name = "tiny"/name = "rel-model"/' "$SRC/specs/models/tiny.toml" >"$tmp/rel/m.toml"
printf '[plan]\nmodel = "m.toml"\nhardware = "h100-sxm"\n' >"$tmp/rel/p.toml"
expect_rc 0 "$LATHE" simulate --plan "$tmp/rel/p.toml" --prompt 8 --gen 4
grep -q "rel-model on h100-sxm" "$tmp/out" || bad "plan-relative model path: $(cat "$tmp/err")"
# Unknown commands are named, with a suggestion.
expect_rc 2 "$LATHE" simulat llama-3-8b a100-80g
grep -q "unknown command 'simulat' (did you mean 'simulate'?)" "$tmp/err" || bad "unknown command: $(cat "$tmp/err")"
# Output through links and devices: a link stays a link, /dev/null stays a device,
# a full device is an error.
expect_rc 0 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --trace /dev/null
[ -c /dev/null ] || bad "--trace /dev/null replaced /dev/null"
ln -s "$tmp/real-trace.json" "$tmp/trace-link.json"
expect_rc 0 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --trace "$tmp/trace-link.json"
[ -L "$tmp/trace-link.json" ] && [ -s "$tmp/real-trace.json" ] || bad "--trace through a symbolic link replaced the link"
if [ -w /dev/full ]; then
  expect_rc 2 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --trace /dev/full
  [ -c /dev/full ] || bad "--trace /dev/full replaced /dev/full"
  # A failed --trace leaves no --plot either (here the trace fails while being written;
  # a failure at its final flush is covered by AtomicFileTest.FinishReportsErrorsBeforeAnyCommit).
  expect_rc 2 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --plot "$tmp/full-beside.svg" --trace /dev/full
  [ ! -e "$tmp/full-beside.svg" ] || bad "--plot landed although --trace failed"
fi
expect_rc 0 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --trace /dev/stdout
grep -q traceEvents "$tmp/out" || bad "--trace /dev/stdout did not reach stdout"
# The command's own inputs are not outputs (a trace over the model TOML replaced it).
cp "$SRC/specs/models/tiny.toml" "$tmp/own-model.toml"
expect_rc 2 "$LATHE" simulate "$tmp/own-model.toml" h100-sxm --prompt 8 --gen 4 --trace "$tmp/own-model.toml"
grep -q -- "--trace .*that is an input of this command" "$tmp/err" || bad "--trace over the model: $(cat "$tmp/err")"
cmp -s "$tmp/own-model.toml" "$SRC/specs/models/tiny.toml" || bad "--trace replaced the model TOML"
printf '[plan]\nmodel = "tiny"\nhardware = "l4"\n[plan.workload]\nbatch = 4\nprompt = 16\ngen = 4\n' >"$tmp/l4plan.toml"
cp "$tmp/l4plan.toml" "$tmp/l4plan.keep"
expect_rc 2 "$LATHE" simulate --plan "$tmp/l4plan.toml" --plot "$tmp/./l4plan.toml"
grep -q -- "--plot .*that is an input of this command" "$tmp/err" || bad "--plot over the plan: $(cat "$tmp/err")"
cmp -s "$tmp/l4plan.toml" "$tmp/l4plan.keep" || bad "--plot replaced the plan file"
# A built-in name is read from the library, so a file of that name may be written again.
lathe_abs=$(realpath "$LATHE")
(cd "$tmp" && "$lathe_abs" simulate tiny h100-sxm --prompt 8 --gen 4 --plot tiny >/dev/null &&
  "$lathe_abs" simulate tiny h100-sxm --prompt 8 --gen 4 --plot tiny >/dev/null) || bad "--plot named like a built-in model, run twice"
# serve-sim's --trace is checked the same way, before the simulation.
cp "$SRC/specs/scenarios/serve-chat.toml" "$tmp/own-scenario.toml"
expect_rc 2 "$LATHE" serve-sim --scenario "$tmp/own-scenario.toml" --requests 5 --trace "$tmp/own-scenario.toml"
grep -q -- "--trace .*that is an input of this command" "$tmp/err" || bad "serve-sim --trace over its scenario: $(cat "$tmp/err")"
cmp -s "$tmp/own-scenario.toml" "$SRC/specs/scenarios/serve-chat.toml" || bad "serve-sim --trace replaced the scenario"
expect_rc 2 "$LATHE" serve-sim --scenario serve-chat --requests 5 --trace ''
grep -q -- "--trace: an empty value" "$tmp/err" || bad "serve-sim --trace '': $(cat "$tmp/err")"
# ... and over an --arrivals-csv trace; simulate's --plot over a hardware TOML.
printf 'arrival_s,prompt_tokens,output_tokens,priority\n0.0,512,64,1\n' >"$tmp/own-arrivals.csv"
cp "$tmp/own-arrivals.csv" "$tmp/own-arrivals.keep"
expect_rc 2 "$LATHE" serve-sim tiny a100-80g --arrivals-csv "$tmp/own-arrivals.csv" --trace "$tmp/own-arrivals.csv"
grep -q -- "--trace .*that is an input of this command" "$tmp/err" || bad "serve-sim --trace over its CSV: $(cat "$tmp/err")"
cmp -s "$tmp/own-arrivals.csv" "$tmp/own-arrivals.keep" || bad "serve-sim --trace replaced the arrivals CSV"
cp "$SRC/specs/hardware/l4.toml" "$tmp/own-hw.toml"
expect_rc 2 "$LATHE" simulate tiny "$tmp/own-hw.toml" --prompt 8 --gen 4 --plot "$tmp/own-hw.toml"
grep -q -- "--plot .*that is an input of this command" "$tmp/err" || bad "--plot over the hardware TOML: $(cat "$tmp/err")"
cmp -s "$tmp/own-hw.toml" "$SRC/specs/hardware/l4.toml" || bad "--plot replaced the hardware TOML"
# A plan naming a model file that does not exist is reported at the plan's line.
printf '[plan]\nmodel = "no-such-model.toml"\nhardware = "l4"\n' >"$tmp/missing-model-plan.toml"
expect_rc 2 "$LATHE" simulate --plan "$tmp/missing-model-plan.toml"
grep -q "missing-model-plan.toml:2:[0-9]*: plan.model: no such file: no-such-model.toml" "$tmp/err" ||
  bad "a plan's missing model file: $(cat "$tmp/err")"
# ... and so do scenario and sweep files.
sed 's/^model = .*/model = "gone\/m.toml"/' "$SRC/specs/scenarios/serve-chat.toml" >"$tmp/missing-model-scenario.toml"
expect_rc 2 "$LATHE" check "$tmp/missing-model-scenario.toml"
grep -q "missing-model-scenario.toml:[0-9]*:[0-9]*: scenario.model: no such file: gone/m.toml" "$tmp/err" ||
  bad "a scenario's missing model file: $(cat "$tmp/err")"
sed 's/^hardware = .*/hardware = ["a100-80g", "gpus\/x.toml+hbm_bandwidth_gbs=x2"]/' \
  "$SRC/specs/sweeps/batch-quant-llama3-8b-a100.toml" >"$tmp/missing-hw-sweep.toml"
expect_rc 2 "$LATHE" sweep "$tmp/missing-hw-sweep.toml"
grep -q "missing-hw-sweep.toml:[0-9]*:[0-9]*: sweep.hardware: no such file: gpus/x.toml" "$tmp/err" ||
  bad "a sweep's missing hardware file: $(cat "$tmp/err")"
# whatif takes a plan file's hardware and batch as simulate does (it used its own defaults).
expect_rc 0 "$LATHE" whatif --plan "$tmp/l4plan.toml" --format csv
[ "$(tail -n +2 "$tmp/out" | cut -d, -f2,3 | tr '\n' ' ')" = "l4,4 " ] || bad "whatif --plan: $(cat "$tmp/out")"
expect_rc 0 "$LATHE" whatif --plan "$tmp/l4plan.toml" --hw a100-80g,l4 --batch 2 --format csv
[ "$(tail -n +2 "$tmp/out" | cut -d, -f2,3 | tr '\n' ' ')" = "a100-80g,2 l4,2 " ] || bad "whatif --plan with flags: $(cat "$tmp/out")"
expect_rc 2 "$LATHE" whatif tiny --hw ''
grep -q -- "--hw: an empty value" "$tmp/err" || bad "whatif --hw '': $(cat "$tmp/err")"
# A hardware TOML whose path holds '+' is a path, with or without overrides after it.
mkdir -p "$tmp/c++"
cp "$SRC/specs/hardware/h100-sxm.toml" "$tmp/c++/my+gpu.toml"
expect_rc 0 "$LATHE" simulate tiny "$tmp/c++/my+gpu.toml" --prompt 8 --gen 4 --format json
cp "$tmp/out" "$tmp/plus-plain.json"
expect_rc 0 "$LATHE" simulate tiny "$tmp/c++/my+gpu.toml+hbm_bandwidth_gbs=x2" --prompt 8 --gen 4 --format json
python3 -c "
import json; a = json.load(open('$tmp/plus-plain.json')); b = json.load(open('$tmp/out'))
assert b['hardware'].endswith('+hbm_bandwidth_gbs=x2') and b['tpot_ms'] < a['tpot_ms'], (a['tpot_ms'], b['tpot_ms'])" ||
  bad "overrides after a path holding '+': $(head -c 300 "$tmp/out")"
expect_rc 2 "$LATHE" simulate tiny "$tmp/c++/no+gpu.toml" --prompt 8 --gen 4
grep -q "no+gpu.toml: no such file" "$tmp/err" || bad "a missing path holding '+': $(cat "$tmp/err")"
# ... and so it is in a plan file, beside the plan, run from elsewhere.
printf '[plan]\nmodel = "tiny"\nhardware = "my+gpu.toml+hbm_bandwidth_gbs=x2"\n[plan.workload]\nprompt = 8\ngen = 4\n' >"$tmp/c++/plan.toml"
expect_rc 0 "$LATHE" simulate --plan "$tmp/c++/plan.toml" --format json
python3 -c "import json; assert json.load(open('$tmp/out'))['hardware'].endswith('+hbm_bandwidth_gbs=x2')" ||
  bad "a plan's hardware path holding '+': $(head -c 300 "$tmp/out") $(cat "$tmp/err")"
# whatif --hw: one existing file whose name holds a comma is one target.
cp "$SRC/specs/hardware/l4.toml" "$tmp/a,b.toml"
expect_rc 0 "$LATHE" whatif tiny --hw "$tmp/a,b.toml" --prompt 8 --gen 4 --format csv
[ "$(tail -n +2 "$tmp/out" | wc -l)" = 1 ] || bad "whatif --hw with a comma in the file name: $(cat "$tmp/out")"
# ... also with overrides after it, and in a list.
expect_rc 0 "$LATHE" whatif tiny --hw "a100-80g,$tmp/a,b.toml+hbm_bandwidth_gbs=x2,h200" --prompt 8 --gen 4 --format csv
[ "$(tail -n +2 "$tmp/out" | wc -l)" = 3 ] && grep -q "^l4+hbm_bandwidth_gbs=x2," "$tmp/out" ||
  bad "whatif --hw with a comma in a file name and overrides: $(cat "$tmp/out")"
# ... kept whole with ",," or ", " inside; built-in names are not swallowed by a file
# whose name joins them.
cp "$SRC/specs/hardware/l4.toml" "$tmp/c,,d.toml"
expect_rc 0 "$LATHE" whatif tiny --hw "$tmp/c,,d.toml" --prompt 8 --gen 4 --format csv
[ "$(tail -n +2 "$tmp/out" | wc -l)" = 1 ] || bad "whatif --hw 'c,,d.toml': $(cat "$tmp/err")"
cp "$SRC/specs/hardware/l4.toml" "$tmp/h200,l4"
(cd "$tmp" && "$lathe_abs" whatif tiny --hw a100-80g,h200,l4 --prompt 8 --gen 4 --format csv) >"$tmp/out" 2>"$tmp/err" ||
  bad "whatif --hw beside a file named 'h200,l4': $(cat "$tmp/err")"
[ "$(cut -d, -f1 "$tmp/out" | tail -n +2 | tr '\n' ' ')" = "a100-80g h200 l4 " ] || bad "whatif --hw took a file for built-ins: $(cat "$tmp/out")"
# Switches are 0 or 1 in a hardware TOML too (0.001 was read as on).
sed 's/^nvlink_switch = .*/nvlink_switch = 0.001/' "$SRC/specs/hardware/h100-sxm.toml" >"$tmp/nvsw.toml"
grep -q '^nvlink_switch = 0.001' "$tmp/nvsw.toml" || bad "h100-sxm.toml has no nvlink_switch line to edit"
expect_rc 2 "$LATHE" check "$tmp/nvsw.toml"
grep -q "nvlink_switch: expected 0 or 1, got 0.001" "$tmp/err" || bad "nvlink_switch 0.001: $(cat "$tmp/err")"
# Efficiency factors above 1 are accepted (to 1.5) with a warning: they can beat the floors.
expect_rc 0 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --set efficiency.memory=1.2
grep -q "efficiency.memory = 1.200 is above 1" "$tmp/err" || bad "no warning for efficiency above 1: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4
grep -q "above 1" "$tmp/err" && bad "a built-in spec warns: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --set efficiency.memory=1.2 --ideal
grep -q "above 1" "$tmp/err" && bad "--ideal (no efficiency factors) warns about one: $(cat "$tmp/err")"
# ... the same warning from a hardware TOML in lathe check, and from whatif's overrides.
sed 's/^gemm = .*/gemm = 1.3/' "$SRC/specs/hardware/h100-sxm.toml" >"$tmp/fast-gemm.toml"
grep -q '^gemm = 1.3' "$tmp/fast-gemm.toml" || bad "h100-sxm.toml has no efficiency gemm line to edit"
expect_rc 0 "$LATHE" check "$tmp/fast-gemm.toml"
grep -q "efficiency.gemm = 1.300 is above 1" "$tmp/err" || bad "check: no warning for efficiency above 1: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" whatif tiny --hw h100-sxm,h100-sxm+efficiency.memory=1.2 --prompt 8 --gen 4
grep -q "h100-sxm+efficiency.memory=1.2: efficiency.memory = 1.200 is above 1" "$tmp/err" ||
  bad "whatif: no warning for an override above 1: $(cat "$tmp/err")"
# Large fixed lengths print whole (fixed:1234567 was shown as fixed:1.23457e+06).
expect_rc 0 "$LATHE" serve-sim tiny h100-sxm --requests 2 --prompt fixed:123 --output fixed:1234567
grep -q "output fixed:1234567;" "$tmp/out" || bad "serve-sim fixed:1234567: $(grep stream "$tmp/out")"
# The trace draws the decode steps between the first and last four as one event, so its
# size does not grow with gen (one event per step ran out of memory at 2^24 after 33 s).
expect_rc 0 timeout 60 "$LATHE" simulate tiny h100-sxm --prompt 1 --gen 16777216 --trace "$tmp/huge-trace.json"
python3 - "$tmp/huge-trace.json" <<'PY' || bad "huge --trace"
import json, os, sys
assert os.path.getsize(sys.argv[1]) < 200_000, os.path.getsize(sys.argv[1])
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X" and e["tid"] == 2]
mid = [e for e in ev if e["cat"] == "decode,steps"]
assert len(mid) == 1 and mid[0]["name"] == "decode steps 5-16777211" and mid[0]["args"]["steps"] == 16777207, mid
assert sum(1 for e in ev if "(step 16777215)" in e["name"]) > 0
PY
# A scenario's token distributions are bounded where the file is read (check said OK).
sed 's/^prompt = .*/prompt = "fixed:1e30"/' "$SRC/specs/scenarios/serve-chat.toml" >"$tmp/huge-prompt.toml"
grep -q 'fixed:1e30' "$tmp/huge-prompt.toml" || bad "the scenario fixture lost its prompt line"
expect_rc 2 "$LATHE" check "$tmp/huge-prompt.toml"
grep -q "huge-prompt.toml:[0-9]*:[0-9]*: .*prompt" "$tmp/err" || bad "huge scenario prompt: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" serve-sim --scenario serve-chat --prompt fixed:1e30
grep -q -- "--prompt: values above 16777216" "$tmp/err" || bad "serve-sim --prompt fixed:1e30: $(cat "$tmp/err")"
# An empty output path is refused, not ignored.
expect_rc 2 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --plot ''
grep -q -- "--plot: an empty value" "$tmp/err" || bad "--plot '': $(cat "$tmp/err")"
# A FIFO nobody reads is an error, not a wait for ever.
if mkfifo "$tmp/fifo" 2>/dev/null; then
  expect_rc 2 timeout 20 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --trace "$tmp/fifo"
  grep -q "nobody is reading" "$tmp/err" || bad "FIFO without a reader: $(cat "$tmp/err")"
fi
# A file name near the 255-byte limit (the temporary name beside it was longer).
long=$(printf 'r%.0s' $(seq 1 250)).svg
long2=$(printf 't%.0s' $(seq 1 250)).json
expect_rc 0 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --plot "$tmp/$long" --trace "$tmp/$long2"
[ -s "$tmp/$long" ] || bad "--plot with a 254-byte file name"
python3 -c "import json,sys; json.load(open(sys.argv[1]))['traceEvents']" "$tmp/$long2" ||
  bad "--trace with a 255-byte file name beside a long --plot name: $(head -c 200 "$tmp/$long2")"
# A name over 255 bytes is refused before the simulation, and the other file is not written.
expect_rc 2 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 4 --plot "$tmp/ok-beside.svg" --trace "$tmp/$(printf 'u%.0s' $(seq 1 300)).json"
grep -q "File name too long" "$tmp/err" && [ ! -e "$tmp/ok-beside.svg" ] || bad "a 305-byte --trace name: $(cat "$tmp/err")"
ls -a "$tmp" | grep -q '^\.lathe\.tmp' && bad "a temporary file was left behind"
# gen <= 1 runs no decode step: --per-op shows no decode rows (they showed a time beside no work).
expect_rc 0 "$LATHE" simulate tiny h100-sxm --prompt 8 --gen 1 --per-op
awk '/^Per kernel/{k=1} k && /^  decode /' "$tmp/out" | grep -q . && bad "decode rows at gen 1: $(awk '/^Per kernel/{k=1} k' "$tmp/out" | grep '^  decode ' | head -2)"
grep -q "no decode rows" "$tmp/out" || bad "gen 1 --per-op does not say why decode has no rows"

# ---- compile ----
expect_rc 0 "$LATHE" compile llama-3-8b a100-80g -o "$tmp/plan" --report
# A folder that is not a plan: the plan's entries are added beside what it holds, and
# one of them already there is refused before any work, leaving the folder as it was.
mkdir -p "$tmp/scratch" && echo keep >"$tmp/scratch/notes.txt"
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/scratch"
[ -f "$tmp/scratch/plan.json" ] && [ "$(cat "$tmp/scratch/notes.txt")" = keep ] || bad "compile into a scratch folder"
mkdir -p "$tmp/scratch2" && echo mine >"$tmp/scratch2/report.md"
expect_rc 2 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/scratch2"
grep -q "already holds 'report.md'" "$tmp/err" || bad "conflicting entry: $(cat "$tmp/err")"
[ "$(cat "$tmp/scratch2/report.md")" = mine ] && [ ! -e "$tmp/scratch2/plan.json" ] || bad "a refused compile changed the folder"
# Compiling again into that folder (it now has a plan.json) replaces the plan's entries
# and keeps what lathe did not write, also where an earlier --emit left a kernels/ folder
# this compile does not write.
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/scratch" --emit cpu
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 8 --gen 5 -o "$tmp/scratch"
[ "$(cat "$tmp/scratch/notes.txt")" = keep ] && [ ! -e "$tmp/scratch/kernels" ] && grep -q '"gen": 5' "$tmp/scratch/plan.json" ||
  bad "compile again into a folder with notes: $(ls "$tmp/scratch")"
# A plan.json lathe did not write (no "lathe_plan" field) does not make the folder a
# plan directory: it is refused, not replaced, and its neighbours stay.
mkdir -p "$tmp/foreign" && echo '{"mine": 1}' >"$tmp/foreign/plan.json" && echo mine >"$tmp/foreign/src.c"
expect_rc 2 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/foreign"
grep -q "its plan.json is not one lathe wrote) and already holds 'plan.json'" "$tmp/err" || bad "foreign plan.json: $(cat "$tmp/err")"
[ "$(cat "$tmp/foreign/src.c")" = mine ] && grep -q '"mine"' "$tmp/foreign/plan.json" || bad "compile replaced a foreign plan.json"
# ... nor does a directory or a FIFO of that name (one crashed compile, the other hung it).
mkdir -p "$tmp/dirmarker/plan.json"
expect_rc 2 timeout 20 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/dirmarker"
grep -q "already holds 'plan.json'" "$tmp/err" && [ -d "$tmp/dirmarker/plan.json" ] || bad "plan.json directory: $(cat "$tmp/err")"
mkdir -p "$tmp/fifomarker" && mkfifo "$tmp/fifomarker/plan.json"
expect_rc 2 timeout 20 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/fifomarker"
grep -q "already holds 'plan.json'" "$tmp/err" && [ -p "$tmp/fifomarker/plan.json" ] || bad "plan.json FIFO: $(cat "$tmp/err")"
# --dump-dir: the dumps never replace the plan, and a rerun replaces the old dumps.
expect_rc 2 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/scratch" --dump-dir "$tmp/scratch/"
grep -q "the same directory as -o" "$tmp/err" && [ -f "$tmp/scratch/plan.json" ] || bad "--dump-dir = -o: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/scratch" --dump-dir "$tmp/dumps"
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/scratch" --dump-dir "$tmp/dumps" --passes fuse-qkv
[ "$(ls "$tmp/dumps" | wc -l)" -eq 5 ] && [ -f "$tmp/dumps/lathe-dumps.txt" ] || bad "dumps rerun: $(ls "$tmp/dumps")"
# A dump folder that is not lathe's (here: an earlier lathe's, without the marker) is
# refused before the plan is written.
mkdir -p "$tmp/olddumps" && cp "$tmp/dumps/00_input.decode.ir" "$tmp/olddumps/" && echo '{}' >"$tmp/olddumps/plan.json"
expect_rc 2 "$LATHE" compile tiny cpu-host --prompt 8 --gen 6 -o "$tmp/scratch" --dump-dir "$tmp/olddumps"
grep -q "already holds '00_input.decode.ir'" "$tmp/err" && ! grep -q '"gen": 6' "$tmp/scratch/plan.json" ||
  bad "dump conflict after the plan was written: $(cat "$tmp/err")"
# The default thread count follows the CPUs this process may use (a container's cpuset,
# taskset), not every online CPU.
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then
  taskset -c 0 "$LATHE" run tiny --prompt-tokens 4 --gen 2 --format json >"$tmp/out" 2>"$tmp/err" || bad "run under taskset: $(cat "$tmp/err")"
  python3 -c "import json; assert json.load(open('$tmp/out'))['threads'] == 1" || bad "run under taskset -c 0 did not default to 1 thread"
fi
# LATHE_PERF_MAP=1: the JIT writes /tmp/perf-PID.map ("START SIZE NAME", hex) naming each
# loaded kernel's functions; each kernel entry carries its node. Without it, no map.
bash -c 'echo $$ >"$1/pid"; exec env LATHE_PERF_MAP=1 "$2" run tiny --prompt-tokens 4 --gen 2 --cache-dir "$1/pmcache" >/dev/null 2>"$1/err"' _ "$tmp" "$LATHE" ||
  bad "run with LATHE_PERF_MAP: $(cat "$tmp/err")"
map=/tmp/perf-$(cat "$tmp/pid").map
trap 'rm -rf "$tmp"; rm -f "$map"' EXIT
if [ -f "$map" ]; then
  python3 - "$map" <<'PY' || bad "perf map: $(head -3 "$map")"
import re, sys
rows = [l.rstrip("\n").split(" ", 2) for l in open(sys.argv[1])]
assert rows and all(re.fullmatch("[0-9a-f]+", a) and re.fullmatch("[0-9a-f]+", s) and int(s, 16) > 0 for a, s, _ in rows)
starts = sorted((int(a, 16), int(s, 16)) for a, s, _ in rows)
assert all(a + s <= b for (a, s), (b, _) in zip(starts, starts[1:])), "overlapping ranges"
names = [n for _, _, n in rows]
assert any(re.fullmatch(r"k_[0-9a-f]{16} \[tiny\.(prefill|decode)/l0\.qkv\]", n) for n in names), names[:5]
assert any("lk::gemm_kernel<" in n for n in names)
PY
  rm -f "$map"
else
  bad "LATHE_PERF_MAP=1 wrote no $map"
fi
touch "$tmp/before-run"
bash -c 'echo $$ >"$1/pid"; exec env -u LATHE_PERF_MAP "$2" run tiny --prompt-tokens 4 --gen 2 --cache-dir "$1/pmcache" >/dev/null 2>&1' _ "$tmp" "$LATHE"
map=/tmp/perf-$(cat "$tmp/pid").map
[ ! -e "$map" ] || [ ! "$map" -nt "$tmp/before-run" ] || bad "a perf map without LATHE_PERF_MAP"
# --gen 0 (prefill only) compiles a plan that runs.
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 8 --gen 0 -o "$tmp/gen0"
expect_rc 0 "$LATHE" run "$tmp/gen0"
for p in fuse-qkv fuse-gate-up fuse-norm-matmul fuse-epilogue fuse-rope-kvwrite flash-attention kv-layout quantize-weights quantize-kv memory-plan; do
  grep -q -- "$p" "$tmp/plan/report.md" || bad "report lacks $p"
done
for f in plan.json prefill.ir decode.ir report.md; do [ -f "$tmp/plan/$f" ] || bad "plan lacks $f"; done
expect_rc 0 "$LATHE" compile mixtral-8x7b h100-sxm -o "$tmp/plan" --passes fuse-qkv,memory-plan --print-ir-after fuse-qkv --dump-dir "$tmp/dump"
grep -q "IR after fuse-qkv (decode)" "$tmp/out" || bad "--print-ir-after"
ls "$tmp/dump" | grep -q "01_fuse-qkv.decode.ir" || bad "--dump-dir"
expect_rc 0 "$LATHE" compile tiny cpu-host -o "$tmp/plan" --no-pass fuse-qkv --print-ir-after-change
grep -q "IR after fuse-gate-up" "$tmp/out" || bad "--print-ir-after-change"
grep -q "IR after quantize-weights" "$tmp/out" && bad "--print-ir-after-change printed an unchanged pass"
mkdir -p "$tmp/notplan"; echo x >"$tmp/notplan/keep"
expect_rc 0 "$LATHE" compile tiny cpu-host -o "$tmp/notplan"
[ -f "$tmp/notplan/keep" ] && [ -f "$tmp/notplan/plan.json" ] || bad "compile into a non-plan directory lost a file"
mkdir -p "$tmp/notplan2"; echo mine >"$tmp/notplan2/report.md"
expect_rc 2 "$LATHE" compile tiny cpu-host -o "$tmp/notplan2"
grep -q mine "$tmp/notplan2/report.md" && [ ! -e "$tmp/notplan2/plan.json" ] || bad "compile overwrote a file it does not own"
expect_rc 2 "$LATHE" compile tiny cpu-host -o "$tmp/plan" --passes fuse-qkv,bogus

# ---- run (CPU backend) ----
export LATHE_CACHE_DIR="$tmp/jit-cache"
expect_rc 0 "$LATHE" run tiny --prompt-tokens 16 --gen 8 --format json
python3 - "$tmp/out" <<'PY' || bad "run json"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["tokens"]) == 8 and len(d["generated"]) == 1
for k in ("ttft_ms", "tpot_ms", "prefill_ms", "decode_ms", "predicted", "jit"):
    assert k in d, k
assert d["jit"]["compiled"] > 0
PY
first=$(python3 -c "import json; print(json.load(open('$tmp/out'))['tokens'])")
expect_rc 0 "$LATHE" run tiny --prompt-tokens 16 --gen 8 --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['jit']['compiled'] == 0 and d['jit']['cached'] > 0, d['jit']" || bad "second run compiled again (no cache)"
[ "$(python3 -c "import json; print(json.load(open('$tmp/out'))['tokens'])")" = "$first" ] || bad "greedy decode not deterministic"
expect_rc 0 "$LATHE" run tiny-moe --tokens "1,2,3;4,5" --gen 3 --weights int4:g32 --kv int8 --kv-layout paged:4 --per-op
grep -q "decode_attention" "$tmp/out" || bad "run --per-op lacks kernels"
grep -q "GB/s" "$tmp/out" || bad "run --per-op lacks measured bandwidth"
expect_rc 0 "$LATHE" run tiny --gen 2 --per-op --format json
python3 -c "
import json; d = json.load(open('$tmp/out'))
k = [x for x in d['kernels'] if x['kernel'] == 'norm_lm_head'][0]
assert k['bytes'] > 0 and k['flops'] > 0 and abs(k['achieved_gbs'] - k['bytes'] / k['measured_ms'] / 1e6) < 1e-6 * k['achieved_gbs'], k
" || bad "run --per-op json lacks measured profiling figures"
expect_rc 0 "$LATHE" run tiny --tokens 5,6,7 --gen 4 --temperature 0.8 --top-k 20 --top-p 0.9 --sample-seed 3
cp "$tmp/out" "$tmp/sampled1.txt"
# --repeat: each phase's fastest pass; the same tokens (the samplers restart from their
# seeds); per-kernel calls of one pass, not of all.
expect_rc 0 "$LATHE" run tiny --tokens 5,6,7 --gen 4 --temperature 0.8 --top-k 20 --top-p 0.9 --sample-seed 3 --repeat 3
[ "$(grep "sequence 0" "$tmp/out")" = "$(grep "sequence 0" "$tmp/sampled1.txt")" ] || bad "run --repeat sampled other tokens"
grep -q "best of 3 passes" "$tmp/out" || bad "run --repeat does not say it reports the best pass"
expect_rc 0 "$LATHE" run tiny --gen 5 --per-op --format json --repeat 3
python3 -c "
import json; d = json.load(open('$tmp/out'))
r = d['repeat']
assert r['passes'] == 3 and len(r['prefill_ms']) == 3 and len(r['decode_ms']) == 3, r
assert d['prefill_ms'] == min(r['prefill_ms']) and d['decode_ms'] == min(r['decode_ms']), (d['prefill_ms'], r)
pre = [k for k in d['kernels'] if k['phase'] == 'prefill']
dec = [k for k in d['kernels'] if k['phase'] == 'decode']
assert all(k['calls'] == 1 for k in pre) and all(k['calls'] == 4 for k in dec), [(k['name'], k['calls']) for k in d['kernels']]
assert abs(sum(k['measured_ms'] for k in pre) - d['prefill_ms']) <= 0.5 * d['prefill_ms'], 'prefill kernels are not the best pass'
" || bad "run --repeat json"
expect_rc 2 "$LATHE" run tiny --gen 2 --repeat 0
# Clang/LLVM and OpenBLAS are loaded on first use: a command that never runs a kernel
# does not map them, and a JIT module that cannot be found is a located error.
if ldd "$LATHE" | grep -Eq "libLLVM|libclang-cpp|libopenblas"; then bad "lathe links Clang/LLVM or OpenBLAS (they are dlopen()ed)"; fi
LATHE_JIT_MODULE="$tmp/no-such-module.so" "$LATHE" run tiny --prompt-tokens 4 --gen 2 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "no-such-module.so: not found" "$tmp/err" || bad "a missing JIT module is not a located error: $(head -c 300 "$tmp/err")"
expect_rc 0 "$LATHE" compile tiny cpu-host --act f32 -o "$tmp/tplan" --batch 2 --prompt 8 --gen 4 --emit cpu
ls "$tmp/tplan/kernels/cpu/" | grep -q "^k_.*\.cpp$" || bad "--emit cpu wrote no kernels"
grep -q "extern \"C\" void k_" "$tmp/tplan/kernels/cpu/"k_*.cpp || bad "emitted kernels lack functions"
expect_rc 0 "$LATHE" run "$tmp/tplan" --tokens "1,2;3,4,5" --gen 3
expect_rc 2 "$LATHE" run "$tmp/tplan" --tokens "1,2,3,4,5,6,7,8,9,10" --gen 2
grep -q "plan allows" "$tmp/err" || bad "over-long prompt error"
# A compiled plan's workload is run's default (batch 2, prompt 8, gen 4 here: run's own
# 16 / 16 did not fit); options it fixed are refused rather than ignored.
expect_rc 0 "$LATHE" run "$tmp/tplan" --format json
python3 -c "import json; d=json.load(open('$tmp/out')); g=d['generated']; assert len(g) == 2 and all(len(x) == 4 for x in g), g" || bad "run PLAN_DIR did not take the plan's workload"
expect_rc 2 "$LATHE" run "$tmp/tplan" --weights int4:g32 --kv int8
grep -q -- "--weights, --kv: .* is a compiled plan" "$tmp/err" || bad "run PLAN_DIR ignored --weights: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run tiny --tokens 5,6 --gen 2 --temperature nan
grep -q "nan is not a finite number" "$tmp/err" || bad "--temperature nan accepted: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run tiny --gen 0
expect_rc 2 timeout 60 "$LATHE" run tiny --batch 4096 --prompt-tokens 1048576 --gen 1
grep -q "this plan needs .* MB of host memory" "$tmp/err" || bad "a huge run was not refused up front: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" compile tiny h100-sxm --act bf16 -o "$tmp/gpuplan"
expect_rc 2 "$LATHE" run "$tmp/gpuplan" --gen 2
grep -q "the CPU backend computes in f32 activations (the plan has" "$tmp/err" || bad "bf16 plan on the CPU: $(cat "$tmp/err")"
# A hidden size the CPU kernels cannot block is named with the weight and the rule; a
# --cache-dir that is a file is refused (it meant no cache at all).
sed -e 's/^hidden = 128/hidden = 48/' -e 's/^heads = 4/heads = 3/' -e 's/^kv_heads = 2/kv_heads = 1/' \
  -e 's/^head_dim = 32/head_dim = 16/' -e 's/^ffn = 384/ffn = 96/' -e 's/^name = "tiny"/name = "odd48"/' \
  "$SRC/specs/models/tiny.toml" >"$tmp/odd48.toml"
expect_rc 2 "$LATHE" run "$tmp/odd48.toml" --gen 2
grep -q "weight tok_embeddings has rows of 48 values, not a multiple of 32" "$tmp/err" || bad "hidden 48 on the CPU: $(cat "$tmp/err")"
: >"$tmp/cachefile"
expect_rc 2 "$LATHE" run tiny --gen 2 --cache-dir "$tmp/cachefile"
grep -q "the kernel cache directory is not a directory" "$tmp/err" || bad "--cache-dir FILE: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run tiny --backend tpu --gen 2
expect_rc 2 "$LATHE" run tiny --tokens 1,x --gen 2
expect_rc 2 "$LATHE" run tiny --tokens 1,,2 --gen 2
grep -q "empty item" "$tmp/err" || bad "--tokens 1,,2 accepted: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run tiny --tokens 99999 --gen 2
expect_rc 2 "$LATHE" run tiny --tokens "" --gen 2
grep -q "no token ids given" "$tmp/err" || bad "empty --tokens: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run tiny --tokens 1,2 --batch 4 --gen 2
grep -q "excludes" "$tmp/err" || bad "--tokens with --batch: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run tiny --tokens 1,2 --prompt-tokens 8 --gen 2
cp -r "$tmp/tplan" "$tmp/trunc"; head -c 2000 "$tmp/tplan/plan.json" >"$tmp/trunc/plan.json"
expect_rc 2 "$LATHE" run "$tmp/trunc" --gen 2
grep -q "truncated or corrupted" "$tmp/err" || bad "truncated plan error: $(cat "$tmp/err")"
# A number past the double range (the JSON parser's out_of_range, found by the fuzzer:
# it aborted).
cp -r "$tmp/tplan" "$tmp/huge"; printf '23e324' >"$tmp/huge/plan.json"
expect_rc 2 "$LATHE" run "$tmp/huge" --gen 2
grep -q "not a valid plan file" "$tmp/err" || bad "plan with an out-of-range number: $(cat "$tmp/err")"
cp -r "$tmp/tplan" "$tmp/v9"; sed -i 's/"lathe_plan": 1/"lathe_plan": 9/' "$tmp/v9/plan.json"
expect_rc 2 "$LATHE" run "$tmp/v9" --gen 2
grep -q "version 9" "$tmp/err" || bad "plan version error"
# Hand edits of plan.json's IR that crashed the runtime or changed its tokens silently.
# tamper SRC DST PHASES REGEX REPLACEMENT: rewrite the IR of the named phases.
tamper() {
  python3 - "$@" <<'PY'
import json, os, re, sys
src, dst, phases, pat, rep = sys.argv[1:6]
j = json.load(open(src + "/plan.json"))
for ph in phases.split(","):
    new = re.sub(pat, rep, j[ph]["ir"], flags=re.M)
    assert new != j[ph]["ir"], (ph, pat)
    j[ph]["ir"] = new
os.makedirs(dst, exist_ok=True)
open(dst + "/plan.json", "w").write(json.dumps(j))
PY
}
tamper "$tmp/tplan" "$tmp/t-ctx" prefill,decode '^attr final_context = 12' 'attr final_context = 256'
expect_rc 2 "$LATHE" run "$tmp/t-ctx" --gen 6
grep -q "decode graph's T (12) must equal final_context (256)" "$tmp/err" || bad "edited final_context: $(cat "$tmp/err")"
tamper "$tmp/tplan" "$tmp/t-T" decode '^attr T = 12' 'attr T = 1'
expect_rc 2 "$LATHE" run "$tmp/t-T"
grep -q "must equal final_context" "$tmp/err" || bad "edited decode T: $(cat "$tmp/err")"
tamper "$tmp/tplan" "$tmp/t-off" prefill,decode '(-> %x0: f32\[B, S, 128\]) @0' '\1 @9223372036854775807'
expect_rc 2 "$LATHE" run "$tmp/t-off"
grep -q "ends past the arena" "$tmp/err" || bad "offset near 2^63: $(cat "$tmp/err")"
python3 -c "
import json, sys
j = json.load(open(sys.argv[1] + '/plan.json')); j['workload']['batch'] = 1.5
open(sys.argv[2], 'w').write(json.dumps(j))" "$tmp/tplan" "$tmp/t-wl.json"
expect_rc 2 "$LATHE" run "$tmp/t-wl.json"
grep -q "workload" "$tmp/err" || bad "workload batch 1.5: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run "$tmp/tplan" --hw no-such-hw
grep -q -- "--hw: .* is a compiled plan" "$tmp/err" || bad "run PLAN --hw: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run "$tmp/tplan" --batch 4096 --prompt-tokens 1048576
grep -q "compiled for 2 sequences" "$tmp/err" || bad "run PLAN --batch 4096: $(cat "$tmp/err")"
tamper "$tmp/tplan" "$tmp/t-causal" prefill 'causal = 1' 'causal = 0'
expect_rc 2 "$LATHE" run "$tmp/t-causal"
grep -q "causal = 0" "$tmp/err" || bad "non-causal prefill attention accepted: $(cat "$tmp/err")"
python3 -c "
import json, sys
j = json.load(open(sys.argv[1] + '/plan.json')); j['options']['kv_dtype'] = 'int4'; j['model'] = 'other'
open(sys.argv[2], 'w').write(json.dumps(j))" "$tmp/tplan" "$tmp/t-hdr.json"
expect_rc 2 "$LATHE" run "$tmp/t-hdr.json"
grep -q '"model" is "other" but the graphs say "tiny"' "$tmp/err" || bad "plan header unchecked: $(cat "$tmp/err")"
# options.weights names what the graphs' GEMM weights hold, and the target passes what
# hardware TOML does (a zero fp32 peak predicted NaN times; int4 weights over f32 graphs
# loaded).
python3 -c "
import json, sys
j = json.load(open(sys.argv[1] + '/plan.json')); j['options']['weights'] = 'int4:g32'
open(sys.argv[2], 'w').write(json.dumps(j))
j = json.load(open(sys.argv[1] + '/plan.json')); j['options']['weights'] = 'f32'; j['target']['fields']['peak_tflops.fp32'] = 0.0
open(sys.argv[3], 'w').write(json.dumps(j))" "$tmp/tplan" "$tmp/t-w.json" "$tmp/t-peak.json"
expect_rc 2 "$LATHE" run "$tmp/t-w.json"
grep -q '"options.weights" is "int4:g32" but the graphs say "f32"' "$tmp/err" || bad "plan weights header unchecked: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run "$tmp/t-peak.json"
grep -q "target field peak_tflops.fp32 = 0.0 is outside \[0.001, 1e+12\]" "$tmp/err" || bad "plan with a zero peak: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" compile tiny-moe cpu-host -o "$tmp/moeplan" --prompt 8 --gen 4
tamper "$tmp/moeplan" "$tmp/t-moe" prefill,decode '(@layers\.\d\.experts\.w_\w+ : f32\[)4,' '\g<1>1,'
expect_rc 2 "$LATHE" run "$tmp/t-moe"
grep -q "does not hold the graph's 4 experts" "$tmp/err" || bad "expert weight of 1 expert: $(cat "$tmp/err")"
# A cache entry that does not load (a full disk truncated it) is compiled again, and the
# tokens are the same.
expect_rc 0 "$LATHE" run tiny --gen 4 --cache-dir "$tmp/jc"
head -n 3 "$tmp/out" | tail -n 1 >"$tmp/jc-tokens"
for f in "$tmp"/jc/*.o; do head -c 1000 "$f" >"$tmp/jc-part" && cat "$tmp/jc-part" >"$f"; done
expect_rc 0 "$LATHE" run tiny --gen 4 --cache-dir "$tmp/jc"
grep -q "JIT: [1-9][0-9]* kernels compiled" "$tmp/out" && [ "$(head -n 3 "$tmp/out" | tail -n 1)" = "$(cat "$tmp/jc-tokens")" ] ||
  bad "truncated JIT cache entries: $(head -n 3 "$tmp/out") $(cat "$tmp/err")"
# An entry that loads but holds another kernel (no symbol of the kernel asked for) is
# dropped and compiled again too: each entry gets the next entry's object. (Entries read
# after the kernel they hold was loaded fail to load instead: a duplicate definition.)
jc=("$tmp"/jc/*.o)
[ ${#jc[@]} -ge 2 ] || bad "expected several JIT cache entries, found ${#jc[@]}"
cp "${jc[0]}" "$tmp/jc-first"
for ((i = 0; i + 1 < ${#jc[@]}; i++)); do cp "${jc[i + 1]}" "${jc[i]}"; done
cp "$tmp/jc-first" "${jc[${#jc[@]} - 1]}"
expect_rc 0 "$LATHE" run tiny --gen 4 --cache-dir "$tmp/jc"
grep -q "JIT: [1-9][0-9]* kernels compiled" "$tmp/out" && [ "$(head -n 3 "$tmp/out" | tail -n 1)" = "$(cat "$tmp/jc-tokens")" ] ||
  bad "JIT cache entries holding other kernels: $(head -n 3 "$tmp/out") $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run tiny --act bf16 --gen 2
expect_rc 2 "$LATHE" run llama-3-70b --batch 4000 --prompt-tokens 4096 --gen 4096
grep -qi "memory" "$tmp/err" || bad "KV larger than RAM is not reported: $(cat "$tmp/err")"
# What the result is written under is checked before measuring.
expect_rc 2 "$LATHE" probe --buffer-mb 64 -o "$tmp/no-such-dir/p.toml"
grep -q "measuring" "$tmp/err" && bad "probe measured before refusing its output path"
expect_rc 2 "$LATHE" probe --buffer-mb 64 --name 'my"cpu'
grep -q -- "--name: contains '\"'" "$tmp/err" || bad "probe --name with a quote: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" probe --buffer-mb nan
grep -q "nan is not a finite number" "$tmp/err" || bad "probe --buffer-mb nan: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" probe --buffer-mb 64 -o "$tmp/probe.toml"
expect_rc 0 "$LATHE" check "$tmp/probe.toml"
expect_rc 0 "$LATHE" simulate small "$tmp/probe.toml" --act f32
# The probe stamps the kernel build it measured; the same build uses it silently, another
# build (here: an edited id) warns, and `run --format json` reports the build that ran.
grep -qE '^measured_with = "cpu:[0-9a-f]{12}"$' "$tmp/probe.toml" || bad "probe wrote no measured_with: $(grep measured "$tmp/probe.toml")"
grep -q "measured with another build" "$tmp/err" && bad "the probing build warned about its own spec: $(cat "$tmp/err")"
sed -E 's/^measured_with = "cpu:[0-9a-f]+"/measured_with = "cpu:000000000000"/' "$tmp/probe.toml" >"$tmp/probe-old.toml"
expect_rc 0 "$LATHE" simulate small "$tmp/probe-old.toml" --act f32
grep -q "probe-.* was measured with another build of lathe's CPU kernels or cost model (measured_with cpu:000000000000" "$tmp/err" ||
  bad "a spec measured by another build gave no warning: $(cat "$tmp/err")"
# Every command that takes the spec warns, once per spec: whatif with two stale specs
# names both; check shows the id; a compiled plan keeps it, and running the plan warns.
sed -E 's/^measured_with = "cpu:[0-9a-f]+"/measured_with = "cpu:111111111111"/; s/^name = ".*"/name = "probe-two"/' \
  "$tmp/probe.toml" >"$tmp/probe-two.toml"
expect_rc 0 "$LATHE" whatif small --hw "$tmp/probe-old.toml,$tmp/probe-two.toml,$tmp/probe-old.toml+hbm_bandwidth_gbs=x2" --act f32
[ "$(grep -c "was measured with another build" "$tmp/err")" = 2 ] || bad "whatif over two stale specs: $(cat "$tmp/err")"
grep -q "probe-two was measured with another build" "$tmp/err" || bad "whatif named one stale spec: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" check "$tmp/probe-old.toml"
grep -q "measured with     cpu:000000000000 (this lathe cpu:" "$tmp/out" || bad "check shows no measured_with: $(cat "$tmp/out")"
grep -q "was measured with another build" "$tmp/err" || bad "check of a stale spec gave no warning"
expect_rc 0 "$LATHE" advise tiny "$tmp/probe-old.toml" --prompt 32 --gen 4
grep -q "was measured with another build" "$tmp/err" || bad "advise on a stale spec gave no warning"
expect_rc 0 "$LATHE" compile tiny "$tmp/probe-old.toml" -o "$tmp/stale-plan"
expect_rc 0 "$LATHE" run "$tmp/stale-plan" --gen 2
grep -q "was measured with another build" "$tmp/err" || bad "run of a plan compiled for a stale spec gave no warning"
expect_rc 0 "$LATHE" run tiny --gen 2 --hw "$tmp/probe.toml" --format json
python3 - "$tmp/out" "$tmp/probe.toml" <<'PY' || bad "run json measured_with"
import json, re, sys
d = json.load(open(sys.argv[1]))
stamp = re.search(r'^measured_with = "(.*)"$', open(sys.argv[2]).read(), re.M).group(1)
assert d["measured_with"] == stamp, (d["measured_with"], stamp)
PY
# The sgemm efficiency is fitted at two row counts.
grep -qE "^gemm_half_rows = [0-9.]+" "$tmp/probe.toml" || bad "probe wrote no gemm_half_rows"
# And the generated f32 GEMV of decode, at 8 rows.
grep -qE "^gemv = [0-9.]+" "$tmp/probe.toml" || bad "probe wrote no efficiency.gemv"
if grep -qE "^int8 = [0-9.]+" "$tmp/probe.toml"; then  # hosts with 8-bit dot products: the integer GEMVs too
  # Nonzero (a loaded machine can measure the dot peak low and a factor above 1).
  grep -qE "^int_dot_gemv = ([1-9]|0\.[0-9]*[1-9])" "$tmp/probe.toml" &&
    grep -qE "^int8_dot_gemv = ([1-9]|0\.[0-9]*[1-9])" "$tmp/probe.toml" ||
    bad "probe wrote no integer GEMV efficiencies: $(grep gemv "$tmp/probe.toml")"
  grep -qE "^int_dot_gemv_half_k = [0-9.]+ " "$tmp/probe.toml" && grep -qE "^int8_dot_gemv_half_k = [0-9.]+ " "$tmp/probe.toml" ||
    bad "probe wrote no integer GEMV half K: $(grep gemv "$tmp/probe.toml")"
fi
for f in attention_half_dim attention_half_group; do
  grep -qE "^$f = [0-9.]+" "$tmp/probe.toml" || bad "probe wrote no $f"
done
grep -qE "^attention = [0-9.]+ +# measured" "$tmp/probe.toml" || bad "probe did not measure flash attention: $(grep '^attention' "$tmp/probe.toml")"
# The 8-bit dot-product peak is measured exactly where the host has VNNI.
if grep -qwE "avx512_vnni|avx_vnni" /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
  grep -qE "^int8 = [0-9.]+" "$tmp/probe.toml" || bad "probe on a VNNI host wrote no int8 peak"
  # ... and the int4 GEMM efficiency the cost model runs integer GEMMs at (capped at 1: a
  # loaded host can measure the dot-product peak below what the GEMM reaches).
  grep -qE "^int_dot = (0\.[0-9]+|1\.0+) " "$tmp/probe.toml" || bad "probe on a VNNI host wrote no int_dot efficiency"
elif ! grep -qw avx_vnni /proc/cpuinfo; then
  grep -q "^int8 =" "$tmp/probe.toml" && bad "probe wrote an int8 peak on a host without VNNI"
fi

# ---- CUDA backend (compiles without a GPU; runs only with one) ----
expect_rc 0 "$LATHE" compile tiny-moe h100-sxm --act bf16 --weights int4:g32 --kv int8 -o "$tmp/cplan" --emit cuda
ls "$tmp/cplan/kernels/cuda/" | grep -q "^k_.*\.cu$" || bad "--emit cuda wrote no kernels"
grep -q "__global__" "$tmp/cplan/kernels/cuda/"k_*.cu || bad "emitted CUDA lacks kernels"
grep -q "decode_attention" "$tmp/cplan/kernels/cuda/launch_order.txt" || bad "launch order lacks decode attention"
if [ -e /usr/local/cuda/include/cuda_fp16.h ]; then
  expect_rc 0 "$LATHE" compile tiny a100-80g --act f16 --kv int4 -o "$tmp/nplan" --emit cuda --nvrtc
  grep -q "decode_attention" "$tmp/nplan/kernels/cuda/nvrtc_report.md" || bad "--nvrtc report lacks kernels"
  awk -F'|' 'NR>2 && ($6+0 > 0 || $7+0 > 0) {exit 1}' "$tmp/nplan/kernels/cuda/nvrtc_report.md" || bad "--nvrtc reports spills"
fi
sed 's/compute_capability = "9.0"/compute_capability = "7.5"/; s/name = "h200"/name = "old-gpu"/' "$SRC/specs/hardware/h200.toml" >"$tmp/old-gpu.toml"
expect_rc 2 "$LATHE" compile tiny "$tmp/old-gpu.toml" --act f16 -o "$tmp/oldplan" --emit cuda
grep -q "sm_80 or newer" "$tmp/err" || bad "sm_75 target: unclear error: $(cat "$tmp/err")"
if [ -e /usr/local/cuda/include/cuda_fp16.h ]; then
  sed 's/compute_capability = "9.0"/compute_capability = "13.5"/; s/name = "h200"/name = "future-gpu"/' "$SRC/specs/hardware/h200.toml" >"$tmp/future.toml"
  expect_rc 2 "$LATHE" compile tiny "$tmp/future.toml" --act f16 -o "$tmp/futplan" --emit cuda --nvrtc
  grep -q "cannot compile for sm_135" "$tmp/err" || bad "unsupported architecture: unclear error: $(cat "$tmp/err")"
  [ -e "$tmp/futplan" ] && bad "a failed compile left a plan directory"
fi
expect_rc 2 "$LATHE" compile tiny h100-sxm --act f32 -o "$tmp/f32plan" --emit cuda
grep -q "bf16 or f16" "$tmp/err" || bad "f32 activations for CUDA: unclear error: $(cat "$tmp/err")"
# Without --act, an f32 model's CUDA plan computes in bf16 (as run --backend cuda does).
expect_rc 0 "$LATHE" compile tiny h100-sxm -o "$tmp/bf16plan" --emit cuda --format json
python3 -c "import json; d=json.load(open('$tmp/bf16plan/plan.json')); assert d['options']['act_dtype'] == 'bf16', d['options']" ||
  bad "compile --emit cuda of an f32 model without --act"
expect_rc 2 "$LATHE" compile tiny a100-80g --act bf16 --weights fp8 -o "$tmp/fp8plan"
grep -q "sm_89" "$tmp/err" || bad "fp8 on sm_80: unclear error"
# Without a GPU (CI) the CUDA backend must say so and exit 2; with one it runs.
"$LATHE" run tiny --backend cuda --gen 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ]; then grep -q "no CUDA device" "$tmp/err" || bad "run --backend cuda without a GPU: $(cat "$tmp/err")"
elif [ $rc -ne 0 ]; then bad "run --backend cuda exited $rc: $(head -c 300 "$tmp/err")"; fi
"$LATHE" probe --backend cuda >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ]; then grep -q "no CUDA device" "$tmp/err" || bad "probe --backend cuda without a GPU: $(cat "$tmp/err")"
elif [ $rc -ne 0 ]; then bad "probe --backend cuda exited $rc"; fi
# ---- profiling columns ----
expect_rc 0 "$LATHE" simulate llama-3-8b h100-sxm --format json
python3 - "$tmp/out" <<'PY' || bad "simulate json lacks profiling keys"
import json, sys
d = json.load(open(sys.argv[1]))
for o in d["ops"]:
    for k in ("achieved_flops_per_s", "achieved_bytes_per_s", "compute_utilization", "bandwidth_utilization", "l2_hit_rate"):
        assert k in o, k
    assert 0 <= o["compute_utilization"] <= 1.0000001 and 0 <= o["bandwidth_utilization"] <= 1.0000001
assert any(o["l2_hit_rate"] is not None for o in d["ops"]) and any(o["l2_hit_rate"] is None for o in d["ops"])
PY
expect_rc 0 "$LATHE" simulate llama-3-8b h100-sxm --per-op
grep -q "L2 hit" "$tmp/out" || bad "--per-op lacks the L2 column"

# A command killed while writing (SIGTERM; SIGINT at a terminal) removes its temporary
# file and dies of the signal (it left rows.csv.tmp.PID, megabytes of partial rows).
mkdir -p "$tmp/sig"
cat >"$tmp/sig/long.toml" <<'EOF'
[sweep]
name = "long"
models = ["tiny"]
hardware = ["cpu-host", "h100-sxm"]
batch = { from = 1, to = 1048576, step = 1 }
prompt = 64
gen = 16
objectives = ["min tpot_ms"]
EOF
"$LATHE" sweep "$tmp/sig/long.toml" -o "$tmp/sig/rows.csv" --threads 1 >/dev/null 2>&1 &
sig_pid=$!
for _ in $(seq 100); do ls "$tmp"/sig/rows.csv.tmp.* >/dev/null 2>&1 && break; sleep 0.1; done
ls "$tmp"/sig/rows.csv.tmp.* >/dev/null 2>&1 || bad "the long sweep wrote no temporary file"
kill -TERM "$sig_pid"
wait "$sig_pid"
sig_rc=$?
[ "$sig_rc" -eq 143 ] || bad "a sweep killed by SIGTERM exited $sig_rc (expected 143)"
[ -z "$(ls "$tmp"/sig/ | grep -v long.toml)" ] || bad "a killed sweep left: $(ls "$tmp/sig")"

# --help wins over another flag's error; an unknown subcommand of `weights` is named;
# an empty format and a repeated pass are refused (they were taken as not given / run twice).
expect_rc 0 "$LATHE" simulate --help --batch 0
grep -q "Usage: .*simulate" "$tmp/out" || bad "simulate --help --batch 0: $(cat "$tmp/out" "$tmp/err")"
expect_rc 0 "$LATHE" weights init --help --seed -1
grep -q "Usage: .*weights init" "$tmp/out" || bad "weights init --help --seed -1: $(cat "$tmp/out" "$tmp/err")"
expect_rc 2 "$LATHE" weights nope
grep -q "unknown weights subcommand 'nope'; subcommands: init, convert, info" "$tmp/err" || bad "weights nope: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate tiny cpu-host --weights ''
grep -q -- "--weights: an empty value" "$tmp/err" || bad "--weights '': $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate tiny cpu-host --passes fuse-qkv,fuse-qkv
grep -q "pass 'fuse-qkv' appears twice in the pipeline" "$tmp/err" || bad "a repeated pass: $(cat "$tmp/err")"

# ---- serve-sim ----
# One-token outputs have no TPOT: "-" in the table, null in the JSON (it showed 0.00).
expect_rc 0 "$LATHE" serve-sim tiny cpu-host --requests 3 --output fixed:1 --prompt fixed:10 --format json
python3 -c "import json; t=json.load(open('$tmp/out'))['all']['tpot']; assert t['n'] == 0 and t['p50_ms'] is None, t" || bad "serve-sim TPOT without a second token"
python3 -c "import json; d=json.load(open('$tmp/out')); s=d['stream']; assert s['requests'] == 3 and s['prompt'] == {'kind': 'fixed', 'value': 10, 'spec': 'fixed:10'} and s['seed'] == 1 and d['policy']['kv_block'] == 16, d['stream']" || bad "serve-sim json lacks the stream or policy"
expect_rc 0 "$LATHE" serve-sim tiny cpu-host --requests 3 --output fixed:1 --prompt fixed:10 --format csv
python3 -c "
import csv; rows = list(csv.DictReader(open('$tmp/out')))
assert len(rows) == 3 and all(r['tpot_ms'] == '' for r in rows), rows" || bad "serve-sim csv: one-token outputs need an empty tpot_ms"
# Two requests, far apart, each dispatched the moment it arrives: nothing ever waits.
printf 'arrival_s,prompt_tokens,output_tokens\n0,16,2\n30,16,2\n' >"$tmp/apart.csv"
expect_rc 0 "$LATHE" serve-sim llama-3-8b h100-sxm --arrivals-csv "$tmp/apart.csv" --format json
python3 -c "
import json; q = json.load(open('$tmp/out'))['series']['queue']
assert q['peak'] == 0 and max(q['max']) == 0, q['peak']" || bad "serve-sim counts an instant in the queue as a peak"
expect_rc 0 "$LATHE" simulate tiny cpu-host --prompt 8 --gen 1 --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['decode_steps'] == 0 and d['decode_bound'] is None and d['decode_time_shares'] is None, d['decode_bound']" || bad "simulate json with no decode step names a decode bound"
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/cj" --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['output'] == '$tmp/cj' and 'plan.json' in d['files'] and d['predicted']['tpot_ms'] > 0 and d['decode_kernels_per_step'] > 0, d" || bad "compile --format json"
expect_rc 2 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 -o "$tmp/cj2" --format json --report
[ -e "$tmp/cj2" ] && bad "compile --format json --report wrote a plan"
expect_rc 0 "$LATHE" serve-sim llama-3-8b h100-sxm --rate 5 --duration 30 --slo-ttft 500 --slo-tpot 50
grep -q "Little's law" "$tmp/out" || bad "serve-sim text lacks Little's law"
grep -q "goodput" "$tmp/out" || bad "serve-sim text lacks goodput"
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --rate 1e6 --duration 100
grep -q "more than one run simulates" "$tmp/err" || bad "a huge stream: $(cat "$tmp/err")"
expect_rc 2 timeout 60 "$LATHE" check /dev/zero
grep -q "/dev/zero: is a device, not a file" "$tmp/err" || bad "check /dev/zero: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" serve-sim llama-3-8b h100-sxm --rate 5 --requests 200 --batching dynamic --priority-mix 0.3,0.7 \
  --format json --trace "$tmp/serve-trace.json"
python3 - "$tmp/out" "$tmp/serve-trace.json" <<'PY' || bad "serve-sim json or trace"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["requests"] == 200 and d["batching"] == "dynamic"
assert len(d["classes"]) == 2 and [c["priority"] for c in d["classes"]] == [0, 1]
for k in ("ttft", "tpot", "e2e", "queue"):
    for p in ("p50_ms", "p90_ms", "p99_ms"):
        assert d["all"][k][p] >= 0, (k, p)
assert d["all"]["ttft"]["p50_ms"] <= d["all"]["ttft"]["p99_ms"]
L = d["littles_law"]
assert abs(L["L"] - L["lambda_W"]) <= 1e-6 * max(1, L["L"])
s = d["series"]["kv_occupancy"]
assert len(s["mean"]) > 10 and 0 <= s["peak"] <= 1
t = json.load(open(sys.argv[2]))
ev = t["traceEvents"]
assert any(e.get("cat") == "prefill" for e in ev) and any(e.get("cat") == "decode" for e in ev)
assert any(e["ph"] == "M" and e["args"]["name"].startswith("slot ") for e in ev)
assert any(e["ph"] == "C" for e in ev)
PY
expect_rc 0 "$LATHE" serve-sim llama-3-8b h100-sxm --requests 50 --format csv
head -1 "$tmp/out" | grep -q "^id,arrival_s,priority" || bad "serve-sim csv header"
[ "$(wc -l <"$tmp/out")" -eq 51 ] || bad "serve-sim csv rows"
printf 'arrival_s,prompt_tokens,output_tokens,priority\n0.0,512,64,1\n0.01,128,32,0\n0.5,2048,16,0\n' >"$tmp/trace.csv"
expect_rc 0 "$LATHE" serve-sim llama-3-8b a100-80g --arrivals-csv "$tmp/trace.csv" --batching chunked
grep -q "3 requests from" "$tmp/out" || bad "serve-sim did not read the CSV trace"
printf '0.1,10,5\n0.2,x,5\n' >"$tmp/badtrace.csv"
expect_rc 2 "$LATHE" serve-sim llama-3-8b a100-80g --arrivals-csv "$tmp/badtrace.csv"
grep -q "badtrace.csv:2: prompt_tokens" "$tmp/err" || bad "bad trace error lacks file:line: $(cat "$tmp/err")"
# Inputs that would be ignored are refused: --duration with --requests, generator flags
# with a CSV trace, and the same in a scenario file.
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --duration 5 --requests 10
grep -q "give --duration or --requests, not both" "$tmp/err" || bad "serve-sim --duration with --requests: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" serve-sim llama-3-8b a100-80g --arrivals-csv "$tmp/trace.csv" --rate 3 --prompt 100
grep -q -- "--rate, --prompt would be ignored" "$tmp/err" || bad "serve-sim CSV with --rate: $(cat "$tmp/err")"
# ... also where the trace comes from the scenario file; --arrivals-csv replaces a file's generator.
printf '[scenario]\nname = "c"\nkind = "serve"\nmodel = "tiny"\nhardware = "h100-sxm"\n[scenario.arrivals]\ncsv = "%s"\n' "$tmp/trace.csv" >"$tmp/csvscen.toml"
expect_rc 2 "$LATHE" serve-sim --scenario "$tmp/csvscen.toml" --rate 3 --requests 5
grep -q -- "csv trace (.*trace.csv); --rate, --requests would be ignored" "$tmp/err" || bad "scenario csv with --rate: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" serve-sim --scenario serve-chat --arrivals-csv "$tmp/trace.csv"
grep -q "3 requests from" "$tmp/out" || bad "--arrivals-csv over a scenario's generator: $(grep stream "$tmp/out")"
printf '[scenario]\nname = "b"\nkind = "serve"\nmodel = "tiny"\nhardware = "h100-sxm"\n[scenario.arrivals]\nduration_s = 5\nrequests = 10\n' >"$tmp/both.toml"
expect_rc 2 "$LATHE" serve-sim --scenario "$tmp/both.toml"
grep -q "give duration_s or requests, not both" "$tmp/err" || bad "scenario with duration_s and requests: $(cat "$tmp/err")"
printf '1e300,100,10\n' >"$tmp/fartrace.csv"
expect_rc 2 "$LATHE" serve-sim llama-3-8b a100-80g --arrivals-csv "$tmp/fartrace.csv"
grep -q "fartrace.csv:1: arrival_s: expected at most 1e9 seconds" "$tmp/err" || bad "arrival 1e300 accepted: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --batching weird
grep -q "expected static, dynamic, continuous or chunked" "$tmp/err" || bad "bad --batching message"
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --prompt gauss:3
grep -q "unknown distribution" "$tmp/err" || bad "bad --prompt message"
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --max-batch 0
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --batching chunked --token-budget 16
expect_rc 2 "$LATHE" serve-sim llama-3-70b a100-40g
grep -q "no room for a KV cache" "$tmp/err" || bad "serve-sim OOM message"
expect_rc 2 "$LATHE" serve-sim --scenario rag-pipeline
grep -q "a rag scenario" "$tmp/err" || bad "wrong scenario kind message"
expect_rc 2 "$LATHE" serve-sim --scenario no-such-scenario
grep -q "serve-chat" "$tmp/err" || bad "unknown scenario does not list built-ins"
expect_rc 0 "$LATHE" serve-sim --scenario serve-priority --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['scenario'] == 'serve-priority' and len(d['classes']) == 2" || bad "serve-priority scenario"

# ---- rag-sim, moe-sim, edge-sim ----
expect_rc 0 "$LATHE" rag-sim llama-3-8b l4 --format json --samples 300
python3 - "$tmp/out" <<'PY' || bad "rag-sim json"
import json, sys
d = json.load(open(sys.argv[1]))
m = {x["mode"]: x for x in d["modes"]}
assert set(m) == {"sequential", "overlapped", "prefetch", "timeout"}
assert m["overlapped"]["e2e"]["p50_ms"] <= m["sequential"]["e2e"]["p50_ms"]
assert d["runtime_threads"] + d["retrieval_threads"] == d["cores"]
assert any(t["advised"] for t in d["threads"])
assert d["request"]["output_tokens"] == 128 and d["cpu"]["retrieval_ms"]["kind"] == "uniform" and d["ideal"] is False, d["request"]
PY
expect_rc 0 "$LATHE" rag-sim --scenario rag-pipeline
grep -q "overlapped" "$tmp/out" || bad "rag-sim text"
# A request that does not fit is refused as by simulate (--allow-oom runs it, flagged).
expect_rc 2 "$LATHE" rag-sim llama-3-70b l4 --samples 10
grep -q "does not fit on l4" "$tmp/err" || bad "rag-sim ran a plan that does not fit: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" rag-sim llama-3-70b l4 --samples 10 --allow-oom --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['fits'] is False and d['memory_bytes'] > d['capacity_bytes']" || bad "rag-sim --allow-oom json"
expect_rc 2 "$LATHE" rag-sim llama-3-8b l4 --cpu-cores 8 --runtime-threads 8
grep -q "no thread" "$tmp/err" || bad "rag-sim thread message"
expect_rc 2 "$LATHE" rag-sim llama-3-8b l4 --modes sequential,bogus
# moe-sim: a histogram with fewer busy experts than top_k, or non-finite, is an error
# (load went to an expert of share 0); a prefill of 2^30 tokens finishes (it hung);
# --hot-replicas 0 copies none. edge-sim: --beams "" is an error; gen 2^24 finishes.
# rag-sim: a scenario without cpu_cores uses the CPU target's cores, as without one.
expect_rc 2 "$LATHE" moe-sim --scenario moe-mixtral --histogram 1,0,0,0,0,0,0,0 --batch 1
grep -q "top_k = 2" "$tmp/err" || bad "moe-sim one-expert histogram: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" moe-sim --scenario moe-mixtral --histogram inf,1,1,1,1,1,1,1
expect_rc 2 "$LATHE" moe-sim --scenario moe-mixtral --load zipf --histogram 1,1,1,1,1,1,1,1
expect_rc 0 timeout 60 "$LATHE" moe-sim --scenario moe-mixtral --prompt 1048576 --batch 1024 --samples 1 --allow-oom
expect_rc 0 "$LATHE" moe-sim --scenario moe-mixtral --prompt 512 --batch 8 --hot-replicas 0
grep -q "more expert weights" "$tmp/out" && bad "moe-sim --hot-replicas 0 still replicates"
printf '[scenario]\nname = "h"\nkind = "moe"\nmodel = "mixtral-8x7b"\nhardware = "h100-sxm"\n[scenario.moe]\nhistogram = [100, 0, 0, 0, 0, 0, 0, 1]\n' >"$tmp/moeh.toml"
expect_rc 0 "$LATHE" moe-sim --scenario "$tmp/moeh.toml" --batch 1
grep -q "histogram" "$tmp/out" || bad "a scenario histogram without load was ignored: $(head -3 "$tmp/out")"
# 256 experts (top-8): the balanced search took 2.5 minutes at 2 GPUs when it
# re-evaluated every expert for every candidate swap; the text names per-device counts
# instead of 128 ids, and summarizes the 256 shares.
sed 's/^experts = 8/experts = 256/; s/^top_k = 2/top_k = 8/; s/^expert_ffn.*/expert_ffn = 2048/; s/^name.*/name = "moe256"/' \
  "$SRC/specs/models/mixtral-8x7b.toml" >"$tmp/moe256.toml"
expect_rc 0 timeout 60 "$LATHE" moe-sim "$tmp/moe256.toml" h100-sxm --gpus 2 --batch 1,64 --allow-oom
grep -q "128 | 128 experts" "$tmp/out" || bad "moe-sim 256 experts per-device counts: $(tail -3 "$tmp/out")"
grep -q "the hottest 8" "$tmp/out" || bad "moe-sim 256 experts shares: $(sed -n 4p "$tmp/out")"
# 64 GPUs: the per-GPU columns give the range and the busiest device, not 64 values each.
expect_rc 0 timeout 60 "$LATHE" moe-sim "$tmp/moe256.toml" h100-sxm --gpus 64 --batch 64 --samples 32 --allow-oom
grep -q "balanced .* (max: GPU [0-9]*)  *[0-9.]*-[0-9.]* (max: GPU [0-9]*)  *4 experts each" "$tmp/out" &&
  grep -q "the range over the 64 GPUs" "$tmp/out" || bad "moe-sim 64 GPUs text: $(tail -6 "$tmp/out")"
[ "$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$tmp/out")" -lt 200 ] ||
  bad "moe-sim 64 GPUs: lines of $(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$tmp/out") characters"
# One device on a target without an interconnect: 0 rows over a 0 B/s link were NaN
# in the incremental search (an internal error).
expect_rc 0 "$LATHE" moe-sim tiny-moe cpu-host --gpus 1 --context 64
expect_rc 2 "$LATHE" run tiny --gen 2 --sample-seed -5
grep -q -- "--sample-seed: '-5' is negative" "$tmp/err" || bad "--sample-seed -5: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run tiny --gen 2 --sample-seed 18446744073709551616
grep -q "out of the 64-bit range" "$tmp/err" || bad "--sample-seed 2^64: $(cat "$tmp/err")"
expect_rc 0 timeout 60 "$LATHE" moe-sim "$tmp/moe256.toml" h100-sxm --gpus 8 --batch 64 --samples 16 --allow-oom --format json
python3 - "$tmp/out" <<'PY' || bad "moe-sim 256 experts json"
import json, sys
d = json.load(open(sys.argv[1]))
b = d["batches"][0]
assert b["search_stopped"] is False
p = {x["placement"]: x for x in b["placements"]}
assert sorted(e for g in p["balanced"]["experts_on_gpu"] for e in g) == list(range(256))
assert p["balanced"]["step_ms"] <= p["round-robin"]["step_ms"] * (1 + 1e-12)
PY
expect_rc 2 "$LATHE" edge-sim --scenario edge-orin --beams ""
# Unbounded values the simulators took: an infinite priority share put every request in
# the last class; a retrieval time of 1e308 ms printed 63-digit latencies.
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --duration 5 --priority-mix inf,1
grep -q -- "--priority-mix: 'inf' is not a share" "$tmp/err" || bad "--priority-mix inf: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --duration 5 --priority-mix 1e308,1e308
grep -q -- "--priority-mix: '1e308' is not a share" "$tmp/err" || bad "--priority-mix 1e308: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" rag-sim llama-3-8b l4 --samples 5 --retrieval-ms fixed:1e308
grep -q -- "--retrieval-ms: values above" "$tmp/err" || bad "--retrieval-ms 1e308: $(cat "$tmp/err")"
expect_rc 0 timeout 60 "$LATHE" rag-sim small cpu-host --output-tokens 16777216 --samples 1 --allow-oom
expect_rc 0 "$LATHE" edge-sim llama-3-8b --prompt 16000 --gen 4
grep -q "exceeds llama-3-8b's max_context" "$tmp/err" || bad "edge-sim past max_context: $(cat "$tmp/err")"
expect_rc 0 timeout 60 "$LATHE" edge-sim --scenario edge-orin --gen 16777216
printf '[scenario]\nname = "r"\nkind = "rag"\nmodel = "small"\nhardware = "cpu-host"\n' >"$tmp/ragc.toml"
expect_rc 0 "$LATHE" rag-sim --scenario "$tmp/ragc.toml" --format json --samples 100
c1=$(python3 -c "import json; print(json.load(open('$tmp/out'))['cores'])")
expect_rc 0 "$LATHE" rag-sim small cpu-host --format json --samples 100
c2=$(python3 -c "import json; print(json.load(open('$tmp/out'))['cores'])")
[ "$c1" = "$c2" ] && [ "$c1" = 8 ] || bad "rag-sim cores with a scenario ($c1) and without ($c2), cpu-host has 8"
expect_rc 2 "$LATHE" rag-sim small cpu-host --cpu-cores 64 --runtime-threads 8
grep -q "differs from cpu-host's 8 cores" "$tmp/err" || bad "rag-sim --cpu-cores against a CPU target: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" moe-sim mixtral-8x7b h100-sxm --batch 1,64 --samples 32 --format json
python3 - "$tmp/out" <<'PY' || bad "moe-sim json"
import json, sys
d = json.load(open(sys.argv[1]))
assert [b["batch"] for b in d["batches"]] == [1, 64]
for b in d["batches"]:
    p = {x["placement"]: x for x in b["placements"]}
    assert p["balanced"]["step_ms"] <= p["round-robin"]["step_ms"] * (1 + 1e-12)
    assert abs(sum(p["round-robin"]["gpu_load_share"]) - 1) < 1e-9
PY
expect_rc 0 "$LATHE" moe-sim --scenario moe-mixtral
grep -q "round-robin" "$tmp/out" || bad "moe-sim text"
expect_rc 2 "$LATHE" moe-sim llama-3-8b h100-sxm
grep -q "not a mixture-of-experts" "$tmp/err" || bad "moe-sim dense model message"
expect_rc 2 "$LATHE" moe-sim mixtral-8x7b h100-sxm --histogram 1,2
# Memory per GPU: mixtral's 93 GB on one 24 GB L4 is refused; over 4 H100s each holds
# the non-expert weights and 2 of the 8 experts per layer (about 26 GB).
expect_rc 2 "$LATHE" moe-sim mixtral-8x7b l4 --gpus 1
grep -q "does not fit: at batch 1 the GPU needs 93" "$tmp/err" || bad "moe-sim on one L4: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" moe-sim mixtral-8x7b h100-sxm --gpus 4 --batch 1 --samples 8 --format json
python3 -c "
import json; d = json.load(open('$tmp/out'))
for p in d['batches'][0]['placements']:
    assert p['fits'] and 24e9 < p['gpu_memory_bytes'] < 28e9, p['gpu_memory_bytes']
" || bad "moe-sim per-GPU memory"
# edge-sim: the KV and beam tables say whether each row fits; --os-reserve-gb on a
# discrete GPU is reported as not applied.
expect_rc 0 "$LATHE" edge-sim llama-3-70b --format json
python3 -c "
import json; d = json.load(open('$tmp/out'))
assert all(k['fits'] is False for k in d['kv']) and all(b['fits'] is False for b in d['beams'])
" || bad "edge-sim 70B on Orin: KV/beam rows not flagged"
expect_rc 0 "$LATHE" edge-sim llama-3-8b h100-sxm --os-reserve-gb 70
grep -q "has its own memory, so they are not applied" "$tmp/err" || bad "edge-sim os reserve on a discrete GPU: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" edge-sim llama-3-8b --format json
python3 - "$tmp/out" <<'PY' || bad "edge-sim json"
import json, sys
d = json.load(open(sys.argv[1]))
f = {x["weights"]: x for x in d["formats"]}
assert set(f) == {"f16", "int8", "int4:g128"} and d["hardware"] == "jetson-agx-orin-64g"
assert f["int4:g128"]["ms_per_token"] < f["int8"]["ms_per_token"] < f["f16"]["ms_per_token"]
assert d["claims_supplied"] is False and all(x["claim"] is None for x in d["formats"])
assert [b["beams"] for b in d["beams"]] == [1, 2, 3, 4]
PY
# A beam claim's memory_gb is the model's weights + KV + activations, as a format
# claim's (it was set beside the beams' KV alone: 16.3 GB "-99%").
cat >"$tmp/edge-claims.toml" <<'EOF'
[scenario]
name = "edge-claims"
kind = "edge"
model = "llama-3-8b"
hardware = "jetson-agx-orin-64g"
[scenario.edge]
weights = ["f16"]
beams = [1, 2]
[[scenario.edge.claims]]
label = "f16"
memory_gb = 16.3
[[scenario.edge.claims]]
label = "beam 2"
memory_gb = 16.3
EOF
expect_rc 0 "$LATHE" edge-sim --scenario "$tmp/edge-claims.toml" --format json
python3 - "$tmp/out" <<'PY' || bad "edge-sim beam claim vs the model's memory"
import json, sys
d = json.load(open(sys.argv[1]))
f, b = d["formats"][0], d["beams"][1]
m = f["memory_gb"]
assert abs(b["model_gb"] - (m["weights"] + b["kv_gb"] + m["activations"])) < 1e-9, b
assert 15 < b["model_gb"] < 17.5, b
PY
# A paged cache holds whole blocks in the beam table too: beam 1 is the plan's own KV and
# total, 2 beams of 640 positions hold 2 x 1000, sharing the prompt saves nothing here.
expect_rc 0 "$LATHE" edge-sim llama-3-8b --kv-layout paged:1000 --formats bf16 --kv-dtypes bf16 --beams 1,2 --format json
python3 - "$tmp/out" <<'PY' || bad "edge-sim paged beams"
import json, sys
d = json.load(open(sys.argv[1]))
m, b = d["formats"][0]["memory_gb"], d["beams"]
assert abs(b[0]["kv_gb"] - m["kv"]) < 1e-9 and abs(b[0]["total_gb"] - m["total"]) < 1e-9, (b[0], m)
assert abs(b[1]["kv_gb"] - 2 * m["kv"]) < 1e-9 and abs(b[1]["kv_gb_shared_prompt"] - 2 * m["kv"]) < 1e-9, b[1]
PY
expect_rc 0 "$LATHE" edge-sim --scenario edge-orin
grep -q "not supplied" "$tmp/out" || bad "edge-sim placeholders not marked 'not supplied'"
printf '[scenario]\nname = "mine"\nkind = "edge"\nmodel = "llama-3-8b"\nhardware = "jetson-agx-orin-64g"\n[[scenario.edge.claims]]\nlabel = "int8"\nms_per_token = 40.0\nsource = "test"\n' >"$tmp/edge.toml"
expect_rc 0 "$LATHE" edge-sim --scenario "$tmp/edge.toml"
grep -q "40.00 (lathe" "$tmp/out" || bad "edge-sim does not print a supplied claim beside lathe's"
expect_rc 2 "$LATHE" edge-sim llama-3-8b --formats int5
# a value named twice (in any spelling) is refused, not printed as a second row
expect_rc 2 "$LATHE" edge-sim llama-3-8b --formats int8:g32,f16,q8_0
grep -q "'q8_0' is the same as 'int8:g32'" "$tmp/err" || bad "edge-sim --formats duplicate: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" edge-sim llama-3-8b --beams 1,2,2
grep -q "'2' is given twice" "$tmp/err" || bad "edge-sim --beams duplicate: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" rag-sim llama-3-8b h100-sxm --modes prefetch,sequential,prefetch
expect_rc 2 "$LATHE" whatif llama-3-8b --hw h100-sxm,h200,h100-sxm
expect_rc 2 "$LATHE" whatif llama-3-8b --batch 1,16,1
grep -q "'1' is given twice" "$tmp/err" || bad "whatif --batch duplicate: $(cat "$tmp/err")"
printf '[scenario]\nname = "d"\nkind = "edge"\nmodel = "llama-3-8b"\nhardware = "jetson-agx-orin-64g"\n[scenario.edge]\nkv_dtypes = ["f16", "int8", "f16"]\n' >"$tmp/dupe.toml"
expect_rc 2 "$LATHE" edge-sim --scenario "$tmp/dupe.toml"
grep -q 'dupe.toml:7:.*"f16" appears twice' "$tmp/err" || bad "scenario duplicate kv_dtypes: $(cat "$tmp/err")"
printf '[scenario]\nname = "x"\nkind = "serve"\n[scenario.serve]\nmax_bacth = 3\n' >"$tmp/badscen.toml"
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --scenario "$tmp/badscen.toml"
grep -q "badscen.toml:5:" "$tmp/err" || bad "bad scenario error lacks file:line: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" check "$tmp/badscen.toml"
expect_rc 0 "$LATHE" check serve-chat
expect_rc 0 "$LATHE" specs --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert len(d['scenarios']) >= 6" || bad "specs json lacks scenarios"

# ---- sweep / merge / advise / calibrate / tune ----
expect_rc 0 "$LATHE" sweep batch-quant-llama3-8b-a100 -o "$tmp/sw.csv" --emit-best "$tmp/best"
[ -f "$tmp/best/plan.json" ] || bad "sweep --emit-best wrote no plan directory"
[ "$(($(wc -l <"$tmp/sw.csv") - 1))" -eq 120 ] || bad "sweep wrote $(wc -l <"$tmp/sw.csv") lines, want 120 rows + header"
grep -q "Pareto front" "$tmp/out" || bad "sweep prints no Pareto front"
grep -q "Best plan per objective" "$tmp/out" || bad "sweep prints no best plans"
expect_rc 0 "$LATHE" sweep kv-long-context --format json --threads 1
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['evaluated'] == 160 and d['front'] and all(b['plan'] for b in d['best'])" || bad "sweep json"
expect_rc 0 "$LATHE" check hardware-mixtral
grep -q "points            384" "$tmp/out" || bad "check of a sweep lacks its size"
expect_rc 0 "$LATHE" specs
grep -q "kv-long-context" "$tmp/out" || bad "specs lacks the built-in sweeps"
# The built-in plans are listed, and check takes their names as the commands' --plan does.
grep -q "^  llama-3-8b-int4  llama-3-8b  a100-80g  int4:g128  int8" "$tmp/out" || bad "specs lacks the built-in plans"
expect_rc 0 "$LATHE" check llama-3-8b-int4
grep -q "^plan (built-in plans/llama-3-8b-int4.toml): OK" "$tmp/out" || bad "check of a built-in plan: $(head -2 "$tmp/out")"
expect_rc 0 "$LATHE" specs --format json
python3 -c "import json; d=json.load(open('$tmp/out')); p=[x for x in d['plans'] if x['name']=='llama-3-8b-int4']; assert p and p[0]['weights']=='int4:g128' and p[0]['batch']==4, d['plans']" || bad "specs json lacks the plans"
# A CPU sweep whose winner lathe run executes.
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nbatch = [1, 2]\nprompt = [8]\ngen = [4]\nweights = ["auto", "int8"]\nobjectives = ["min tpot_ms"]\n' >"$tmp/cpu-sweep.toml"
expect_rc 0 "$LATHE" sweep "$tmp/cpu-sweep.toml" -o "$tmp/cpu.jsonl" --emit-best "$tmp/cpubest"
[ "$(wc -l <"$tmp/cpu.jsonl")" -eq 4 ] || bad "jsonl sweep rows"
expect_rc 0 "$LATHE" run "$tmp/cpubest" --prompt-tokens 8 --gen 3
# An ideal sweep's emitted plan is costed ideal in its per-pass table too (the table was
# always costed with the efficiency factors, beside ideal headline figures).
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nbatch = [1]\nprompt = [8]\ngen = [4]\nideal = true\nobjectives = ["min tpot_ms"]\n' >"$tmp/ideal-sweep.toml"
expect_rc 0 "$LATHE" sweep "$tmp/ideal-sweep.toml" -o "$tmp/ideal.csv" --emit-best "$tmp/idealbest"
grep -q "costed: ideal roofline" "$tmp/idealbest/report.md" || bad "an ideal sweep's report does not say it is ideal"
expect_rc 0 "$LATHE" simulate tiny cpu-host --batch 1 --prompt 8 --gen 4 --ideal --format json
python3 -c "
import json, sys
plan = json.load(open(sys.argv[1])); sim = json.load(open(sys.argv[2]))
last = plan['passes'][-1]
assert abs(last['prefill_ms'] - sim['prefill_ms']) <= 1e-9 * sim['prefill_ms'], (last['prefill_ms'], sim['prefill_ms'])
assert abs(last['tpot_ms'] - sim['tpot_ms']) <= 1e-9 * sim['tpot_ms'], (last['tpot_ms'], sim['tpot_ms'])" "$tmp/idealbest/plan.json" "$tmp/out" || bad "an ideal sweep's per-pass records are not ideal"
# A constraint at a row's value as written (7 digits): merge keeps the sweep's verdict,
# decided on the exact value (it re-applied the bound to the rounded value, and a sweep
# that refused as infeasible merged into a feasible one).
printf '[sweep]\nmodels = ["llama-3-8b"]\nhardware = ["a100-80g"]\nbatch = [1, 2]\nprompt = 512\ngen = 256\nobjectives = ["min tpot_ms"]\n' >"$tmp/bnd.toml"
expect_rc 0 "$LATHE" sweep "$tmp/bnd.toml" -o "$tmp/bnd.csv"
ttft0=$(python3 -c "import csv,sys; print(next(csv.DictReader(open(sys.argv[1])))['ttft_ms'])" "$tmp/bnd.csv")
printf '[sweep.constraints]\nttft_ms = %s\n' "$ttft0" >>"$tmp/bnd.toml"
"$LATHE" sweep "$tmp/bnd.toml" -o "$tmp/bnd.csv" >/dev/null 2>&1; rc_sweep=$?
"$LATHE" sweep "$tmp/bnd.toml" --shard 0/2 -o "$tmp/bnd0.csv" >/dev/null 2>&1
"$LATHE" sweep "$tmp/bnd.toml" --shard 1/2 -o "$tmp/bnd1.csv" >/dev/null 2>&1
"$LATHE" merge "$tmp/bnd0.csv" "$tmp/bnd1.csv" -o "$tmp/bndm.csv" --sweep "$tmp/bnd.toml" >/dev/null 2>"$tmp/err"; rc_merge=$?
[ "$rc_sweep" -eq "$rc_merge" ] || bad "sweep (exit $rc_sweep) and merge (exit $rc_merge) disagree at a bound: $(cat "$tmp/err")"
# More JSONL shards than points: the empty ones merge (they were read as CSV without a header).
for i in 0 1 2 3 4 5; do expect_rc 0 "$LATHE" sweep "$tmp/cpu-sweep.toml" --shard $i/6 -o "$tmp/cs$i.jsonl"; done
[ -s "$tmp/cs5.jsonl" ] && bad "shard 5 of 6 of a 4-point sweep has rows"
expect_rc 0 "$LATHE" merge "$tmp"/cs?.jsonl -o "$tmp/cs.jsonl"
cmp -s "$tmp/cs.jsonl" "$tmp/cpu.jsonl" || bad "merged JSONL shards differ from the whole sweep"
# cost_per_mtok with gen = 0 (no generated tokens: its cost read 0, the best), and a
# 'mul' range from 0 (it said "more than 2^24 values").
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host+price_per_hour=1"]\nprompt = [8]\ngen = [0, 4]\nobjectives = ["min cost_per_mtok"]\n' >"$tmp/g0.toml"
expect_rc 2 "$LATHE" sweep "$tmp/g0.toml" -o "$tmp/g0.csv"
grep -q "gen = 0 generates none" "$tmp/err" || bad "cost sweep with gen 0: $(cat "$tmp/err")"
# Paths in a sweep file are relative to it; rows of a model file edited between two
# shards do not merge (the sweep id hashes the specs); two specs of one name are refused.
mkdir -p "$tmp/swrel"
cp "$SRC/specs/models/tiny.toml" "$tmp/swrel/m.toml"
printf '[sweep]\nmodels = ["m.toml"]\nhardware = ["cpu-host"]\nprompt = [8]\ngen = [4]\nbatch = [1, 2]\n' >"$tmp/swrel/s.toml"
expect_rc 0 "$LATHE" sweep "$tmp/swrel/s.toml" --shard 0/2 -o "$tmp/swrel0.csv"
sed -i 's/^layers = .*/layers = 4/' "$tmp/swrel/m.toml"
expect_rc 0 "$LATHE" sweep "$tmp/swrel/s.toml" --shard 1/2 -o "$tmp/swrel1.csv"
expect_rc 2 "$LATHE" merge "$tmp/swrel0.csv" "$tmp/swrel1.csv" -o "$tmp/swrelm.csv"
grep -q "changed between the runs" "$tmp/err" || bad "merge joined rows of an edited model file: $(cat "$tmp/err")"
sed 's/^name = .*/name = "cpu-host"/' "$SRC/specs/hardware/cpu-host.toml" >"$tmp/swrel/h.toml"
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host", "h.toml"]\nprompt = [8]\ngen = [4]\n' >"$tmp/swrel/dup.toml"
expect_rc 2 "$LATHE" sweep "$tmp/swrel/dup.toml" -o "$tmp/dup.csv"
grep -q "are both named 'cpu-host'" "$tmp/err" || bad "two hardware specs of one name: $(cat "$tmp/err")"
# No feasible plan: exit 2, and with --format json the counts still reach stdout.
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nprompt = [8]\ngen = [4]\n[sweep.constraints]\ntpot_ms = 0.000001\n' >"$tmp/nofeas.toml"
expect_rc 2 "$LATHE" sweep "$tmp/nofeas.toml" --format json -o "$tmp/nofeas.csv"
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['feasible'] == 0 and any(v['plans'] == 1 for v in d['violations'])" || bad "infeasible sweep --format json: $(head -c 300 "$tmp/out")"
# The same for TPOT (gen 0's TPOT, one step right after the prompt, won min tpot_ms).
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nprompt = [8]\ngen = [0, 16]\n' >"$tmp/g0t.toml"
expect_rc 2 "$LATHE" sweep "$tmp/g0t.toml" -o "$tmp/g0t.csv"
grep -q "tpot_ms is a figure of decode steps, and gen = 0 or 1 runs none" "$tmp/err" || bad "TPOT sweep with gen 0: $(cat "$tmp/err")"
# gen 1 runs no decode step either: its TPOT won min tpot_ms, and gen 0 won max decode tok/s.
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nprompt = [8]\ngen = [1, 16]\n' >"$tmp/g1t.toml"
expect_rc 2 "$LATHE" sweep "$tmp/g1t.toml" -o "$tmp/g1t.csv"
grep -q "tpot_ms is a figure of decode steps" "$tmp/err" || bad "TPOT sweep with gen 1: $(cat "$tmp/err")"
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nprompt = [8]\ngen = [0, 16]\nobjectives = ["max decode_tokens_per_s"]\n' >"$tmp/g0d.toml"
expect_rc 2 "$LATHE" sweep "$tmp/g0d.toml" -o "$tmp/g0d.csv"
grep -q "decode_tokens_per_s is a figure of decode steps" "$tmp/err" || bad "decode tok/s sweep with gen 0: $(cat "$tmp/err")"
# check refuses what sweep refuses; advise's TPOT SLO needs a decode step.
expect_rc 2 "$LATHE" check "$tmp/g1t.toml"
grep -q "tpot_ms is a figure of decode steps" "$tmp/err" || bad "check of a TPOT sweep with gen 1: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" advise tiny cpu-host --prompt 8 --gen 1 --slo-tpot 100 --max-batch 2
grep -q -- "--slo-tpot: with --gen 1 no decode step runs" "$tmp/err" || bad "advise --gen 1 --slo-tpot: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" advise tiny cpu-host --prompt 8 --gen 1 --max-batch 2
# 7 what-if axes of 1024 values wrapped the point count to 0 ("OK"); sweep ran out of memory.
python3 -c "
print('[sweep]\nmodels = [\"tiny\"]\nhardware = [\"cpu-host\"]\nprompt = [8]\ngen = [16]\n[sweep.whatif]')
for f in ['hbm_bandwidth_gbs', 'launch_overhead_us', 'memory_gb', 'clock_mhz', 'l2_mb', 'sm_count', 'interconnect_latency_us']:
    print(f + ' = [' + ', '.join('\"x%.6f\"' % (1 + i / 4096) for i in range(1024)) + ']')" >"$tmp/w7.toml"
expect_rc 2 "$LATHE" check "$tmp/w7.toml"
grep -q "more than 2^60 points" "$tmp/err" || bad "check of 2^70 what-if points: $(cat "$tmp/err") $(head -c 300 "$tmp/out")"
expect_rc 2 "$LATHE" sweep "$tmp/w7.toml" -o "$tmp/w7.csv"
grep -q "more than 2^60 points" "$tmp/err" || bad "sweep of 2^70 what-if points: $(cat "$tmp/err")"
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nbatch = { from = 1, to = 1048576 }\nprompt = { from = 1, to = 16777216 }\ngen = { from = 2, to = 16777216 }\n' >"$tmp/giant.toml"
expect_rc 2 "$LATHE" check "$tmp/giant.toml"
grep -q "more than 2^60 points" "$tmp/err" || bad "check of a sweep of 3e20 points: $(cat "$tmp/err") $(cat "$tmp/out")"
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nprompt = [8]\ngen = { from = 0, to = 64, mul = 2 }\n' >"$tmp/mul0.toml"
expect_rc 2 "$LATHE" check "$tmp/mul0.toml"
grep -q "must start above 0" "$tmp/err" || bad "mul range from 0: $(cat "$tmp/err")"
# Shards joined in any order are the full sweep, byte for byte.
for i in 0 1 2; do expect_rc 0 "$LATHE" sweep hardware-mixtral --shard $i/3 -o "$tmp/shard$i.csv"; done
expect_rc 0 "$LATHE" merge "$tmp/shard2.csv" "$tmp/shard0.csv" "$tmp/shard1.csv" -o "$tmp/m1.csv" --sweep hardware-mixtral
grep -q "Pareto front" "$tmp/out" || bad "merge --sweep prints no front"
expect_rc 0 "$LATHE" merge "$tmp/shard0.csv" "$tmp/shard1.csv" "$tmp/shard2.csv" "$tmp/shard1.csv" -o "$tmp/m2.jsonl"
expect_rc 0 "$LATHE" merge "$tmp/m2.jsonl" -o "$tmp/m2.csv"
expect_rc 0 "$LATHE" sweep hardware-mixtral -o "$tmp/full.csv"
cmp -s "$tmp/m1.csv" "$tmp/full.csv" || bad "merged shards differ from the full sweep"
cmp -s "$tmp/m2.csv" "$tmp/full.csv" || bad "merge depends on the order of its inputs"
# With the sweep file, a row's axes must be its point's (a row edited to another batch
# kept its point number and was ranked as that point).
python3 - "$tmp/shard0.csv" "$tmp/shard-edit.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
rows[1][rows[0].index("batch")] = "999"
csv.writer(open(sys.argv[2], "w"), lineterminator="\n").writerows(rows)
PY
expect_rc 2 "$LATHE" merge "$tmp/shard-edit.csv" "$tmp/shard1.csv" "$tmp/shard2.csv" -o "$tmp/m3.csv" --sweep hardware-mixtral
grep -q "has batch 999, but the sweep's point" "$tmp/err" || bad "merge --sweep took a row of another batch: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" merge "$tmp/shard0.csv" "$tmp/sw.csv" -o "$tmp/mix.csv"
expect_rc 2 "$LATHE" merge "$tmp/shard0.csv" -o "$tmp/eb.csv" --sweep hardware-mixtral --emit-best "$tmp/shard1.csv"
[ -e "$tmp/eb.csv" ] && bad "merge with a bad --emit-best wrote its rows first"
[ -e "$tmp/mix.csv" ] && bad "a failed merge left an output file"
# options that mean nothing without another are refused, not ignored
for extra in "--top 3" "--emit-best $tmp/eb-x" "--samples 4" "--sweep hardware-mixtral --seed 2" "--sweep hardware-mixtral --allow-missing"; do
  # shellcheck disable=SC2086
  expect_rc 2 "$LATHE" merge "$tmp/shard0.csv" -o "$tmp/x.csv" $extra
  grep -q "requires" "$tmp/err" || bad "merge $extra: $(cat "$tmp/err")"
done
expect_rc 2 "$LATHE" sweep kv-long-context --seed 3
grep -q -- "--seed requires --samples" "$tmp/err" || bad "sweep --seed without --samples: $(cat "$tmp/err")"
# A missing shard: --emit-best refuses (the best of two thirds of the rows need not be
# the sweep's best) unless --allow-missing; a header-only input with --sweep fails
# before writing anything.
expect_rc 2 "$LATHE" merge "$tmp/shard0.csv" "$tmp/shard1.csv" -o "$tmp/part.csv" --sweep hardware-mixtral --emit-best "$tmp/eb-part"
grep -q "allow-missing" "$tmp/err" || bad "--emit-best with a missing shard: $(cat "$tmp/err")"
[ -e "$tmp/part.csv" ] || [ -e "$tmp/eb-part" ] && bad "a refused --emit-best merge wrote files"
expect_rc 0 "$LATHE" merge "$tmp/shard0.csv" "$tmp/shard1.csv" -o "$tmp/part.csv" --sweep hardware-mixtral --emit-best "$tmp/eb-part" --allow-missing
[ -e "$tmp/eb-part/plan.json" ] || bad "--allow-missing emitted no plan"
expect_rc 0 "$LATHE" merge "$tmp/shard0.csv" "$tmp/shard1.csv" -o "$tmp/partj.csv" --sweep hardware-mixtral --emit-best "$tmp/eb-partj" --allow-missing --format json
python3 - "$tmp/out" "$tmp/eb-partj" <<'PY' || bad "merge --format json lacks id, coverage or emitted"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["id"]) == 16 and d["emitted"] == sys.argv[2] and "of the sweep's" in d["coverage"], d
PY
expect_rc 0 "$LATHE" merge "$tmp/shard0.csv" -o "$tmp/partk.csv" --format json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['id']) == 16 and d['rows'] > 0, d" "$tmp/out" || bad "merge json without --sweep lacks the id"
head -1 "$tmp/shard0.csv" >"$tmp/header-only.csv"
expect_rc 2 "$LATHE" merge "$tmp/header-only.csv" -o "$tmp/hs.csv" --sweep hardware-mixtral
[ -e "$tmp/hs.csv" ] && bad "a merge of no rows left its output file"
expect_rc 2 "$LATHE" sweep hardware-mixtral --shard 3/3
expect_rc 2 "$LATHE" sweep hardware-mixtral --shard 1
expect_rc 2 "$LATHE" sweep hardware-mixtral --shard 0/2 --emit-best "$tmp/x"
expect_rc 2 "$LATHE" sweep no-such-sweep
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nbatch = []\n' >"$tmp/empty.toml"
expect_rc 2 "$LATHE" sweep "$tmp/empty.toml" -o "$tmp/empty.csv"
grep -q "empty.toml:4:9: sweep.batch: empty axis" "$tmp/err" || bad "empty axis error: $(cat "$tmp/err")"
[ -e "$tmp/empty.csv" ] && bad "a rejected sweep left an output file"
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nobjectives = ["min latency"]\n' >"$tmp/obj.toml"
expect_rc 2 "$LATHE" sweep "$tmp/obj.toml"
grep -q "unknown objective metric 'latency'" "$tmp/err" || bad "unknown objective error: $(cat "$tmp/err")"
printf '[sweep]\nmodels = ["llama-3-8b"]\nhardware = ["a100-80g"]\nbatch = [1, 512]\n[sweep.constraints]\nttft_ms = 0.5\ntpot_ms = 200\n' >"$tmp/none.toml"
expect_rc 2 "$LATHE" sweep "$tmp/none.toml"
grep -q "'ttft_ms <= 0.5' eliminated the most plans" "$tmp/err" || bad "no-feasible-plan error: $(cat "$tmp/err")"
printf '[sweep]\nmodels = ["llama-3-8b"]\nhardware = ["a100-80g"]\nweights = ["fp8"]\n' >"$tmp/fp8.toml"
expect_rc 2 "$LATHE" sweep "$tmp/fp8.toml" -o "$tmp/fp8.csv"
grep -q "weights fp8 not supported on a100-80g" "$tmp/err" || bad "contradictory axes error: $(cat "$tmp/err")"
[ -e "$tmp/fp8.csv" ] && bad "an empty sweep left an output file"

expect_rc 0 "$LATHE" advise llama-3-8b h100-sxm --slo-tpot 25 --slo-ttft 800
for p in "max batch" weights "KV dtype" "KV layout" "TP degree"; do grep -q "$p" "$tmp/out" || bad "advise lacks $p"; done
# Past one 8-GPU NVSwitch board the collectives are still costed over NVLink: a warning.
expect_rc 0 "$LATHE" simulate llama-3.1-405b h200 --tp 16 --weights fp8 --gen 4
grep -q "tp 16 spans more than one 8-GPU NVSwitch board of h200" "$tmp/err" || bad "tp 16 on h200 gave no warning: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" simulate llama-3.1-405b h200 --tp 8 --weights fp8 --gen 4
grep -q "NVSwitch board" "$tmp/err" && bad "tp 8 on h200 warned: $(cat "$tmp/err")"
# A sweep warns too, once per spec and tp (its what-if variants of h200 count as h200).
printf '[sweep]\nmodels = ["llama-3.1-405b"]\nhardware = ["h200"]\nweights = ["fp8"]\ntp = [8, 16]\nprompt = [8]\ngen = [4]\n[sweep.whatif]\nhbm_bandwidth_gbs = ["x1", "x2"]\n' >"$tmp/tp16.toml"
expect_rc 0 "$LATHE" sweep "$tmp/tp16.toml" -o "$tmp/tp16.csv"
[ "$(grep -c "spans more than one 8-GPU NVSwitch board" "$tmp/err")" = 1 ] &&
  grep -q "tp 16 spans more than one 8-GPU NVSwitch board of h200;" "$tmp/err" || bad "sweep tp 16 warning: $(cat "$tmp/err")"
# Configurations are scored at batches their compiled plans fit: mixtral-8x22b on one
# 24 GB card was scored at batch 3, whose plan needs 24.79 GB, while the max batch was 2.
expect_rc 0 "$LATHE" advise mixtral-8x22b rtx-4090 --prompt 32768 --gen 128 --format json
python3 - "$tmp/out" <<'PY' || bad "advise scored a batch its compiled plan does not fit"
import json, re, sys
d = json.load(open(sys.argv[1]))
items = {i["parameter"]: i for i in d["recommendations"]}
top = int(items["max batch"]["value"])
for i in d["recommendations"]:
    for b in re.findall(r"per device at batch (\d+)", i["reason"].split("; ")[0]):
        assert int(b) <= top, (i["parameter"], b, top)
    m = re.search(r"peaks earlier, at batch (\d+)", i["reason"])
    assert m is None or int(m.group(1)) < top, i["reason"]
PY
cmd=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['reproduce'])" "$tmp/out" 2>/dev/null)
[ -n "$cmd" ] && expect_rc 0 "$LATHE" ${cmd#lathe }
# The max-batch runner-up's grid batch fits its compiled plan too (on an h200 it cited
# batch 24 of fp8 / int4 KV / tp 2, whose plan needs 142.32 of 141 GB).
expect_rc 0 "$LATHE" advise mixtral-8x22b h200 --prompt 32768 --gen 128 --format json
ru=$(python3 - "$tmp/out" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
r = [i for i in d["recommendations"] if i["parameter"] == "max batch"][0]["runner_up"]
m = re.match(r"(\d+) on the batch grid, the runner-up configuration's largest \(weights (\S+), KV (\S+), tp (\d+)\)", r)
print(f"--batch {m[1]} --weights {m[2]} --kv {m[3]} --tp {m[4]}" if m else "")
PY
)
[ -n "$ru" ] || bad "advise h200: no runner-up parsed: $(head -c 300 "$tmp/out")"
expect_rc 0 "$LATHE" simulate mixtral-8x22b h200 --prompt 32768 --gen 128 $ru
expect_rc 0 "$LATHE" advise small cpu-host --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert len(d['recommendations']) == 5 and d['plan']['feasible'] and d['reproduce'].startswith('lathe simulate small cpu-host --batch ') and d['plan_shapes'] > 0" || bad "advise json"
expect_rc 2 "$LATHE" advise llama-3-8b l4 --slo-tpot 0.001
expect_rc 2 "$LATHE" advise llama-3-8b no-such-gpu
expect_rc 2 "$LATHE" advise tiny h100-sxm --slo-ttft -5
grep -q "must be above 0, got -5" "$tmp/err" || bad "negative SLO message: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" sweep batch-quant-llama3-8b-a100 --samples 10 --seed -1
grep -q "whole number >= 0" "$tmp/err" || bad "negative seed message: $(cat "$tmp/err")"

: >"$tmp/runs.jsonl"
for spec in "16 1" "8 2" "24 1" "12 1"; do
  set -- $spec
  "$LATHE" run tiny --prompt-tokens "$1" --batch "$2" --gen 5 --per-op --format json >"$tmp/one.json" || bad "run for calibration"
  python3 -c "import json,sys; print(json.dumps(json.load(open('$tmp/one.json'))))" >>"$tmp/runs.jsonl"
done
expect_rc 0 "$LATHE" calibrate "$tmp/runs.jsonl" --hw cpu-host -o "$tmp/cal.toml"
grep -q "held-out runs" "$tmp/out" || bad "calibrate reports no held-out error"
expect_rc 0 "$LATHE" check "$tmp/cal.toml"
# The fitted spec carries the kernel build the runs ran; runs of two builds leave it
# unstamped with a warning; an id that is not one is an error.
grep -qE '^measured_with = "cpu:[0-9a-f]{12}"$' "$tmp/cal.toml" || bad "calibrate wrote no measured_with"
python3 -c "
import json
rows = [json.loads(l) for l in open('$tmp/runs.jsonl')]
rows[1]['measured_with'] = 'cpu:000000000000'
open('$tmp/mixed.jsonl', 'w').write(''.join(json.dumps(r) + '\n' for r in rows))
rows[1]['measured_with'] = 'yesterday'
open('$tmp/badbuild.jsonl', 'w').write(''.join(json.dumps(r) + '\n' for r in rows))
"
expect_rc 0 "$LATHE" calibrate "$tmp/mixed.jsonl" --hw cpu-host -o "$tmp/calmixed.toml"
grep -q "measured with different kernel builds (cpu:000000000000, cpu:" "$tmp/err" || bad "calibrate over two builds: $(cat "$tmp/err")"
grep -q "^measured_with" "$tmp/calmixed.toml" && bad "calibrate over two builds stamped the spec"
# Calibrating from a spec another build measured keeps some of its factors: unstamped.
sed -E 's/^measured_with = "cpu:[0-9a-f]+"/measured_with = "cpu:000000000000"/' "$tmp/cal.toml" >"$tmp/cal-old.toml"
expect_rc 0 "$LATHE" calibrate "$tmp/runs.jsonl" --hw "$tmp/cal-old.toml" -o "$tmp/cal-re.toml"
grep -q "the factors the fit keeps from it describe other kernels" "$tmp/err" || bad "calibrate from a stale spec: $(cat "$tmp/err")"
grep -q "^measured_with" "$tmp/cal-re.toml" && bad "calibrate from a stale spec stamped the result"
expect_rc 2 "$LATHE" calibrate "$tmp/badbuild.jsonl" --hw cpu-host -o "$tmp/calbad.toml"
grep -q "measured_with: 'yesterday' is not a CPU kernel build id" "$tmp/err" || bad "calibrate with a bad build id: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" simulate tiny "$tmp/cal.toml"
head -1 "$tmp/runs.jsonl" >"$tmp/onerun.jsonl"
expect_rc 0 "$LATHE" calibrate "$tmp/onerun.jsonl" --hw cpu-host -o "$tmp/cal1.toml"
# (On a noisy host the warning can open with "the mean relative error ... rose; ".)
grep -q "lathe: warning: .*only 1 fitted run" "$tmp/err" || bad "calibrate on one run gives no warning on stderr: $(cat "$tmp/err")"
grep -q "Warning: .*only 1 fitted run" "$tmp/cal1.toml" || bad "the one-run spec does not carry the warning"
"$LATHE" run tiny --gen 3 --format json >"$tmp/noperop.json"
expect_rc 2 "$LATHE" calibrate "$tmp/noperop.json" --hw cpu-host -o "$tmp/cal2.toml"
grep -q "per-op" "$tmp/err" || bad "calibrate without per-op timings: $(cat "$tmp/err")"
[ -e "$tmp/cal2.toml" ] && bad "a failed calibration left an output file"
expect_rc 2 "$LATHE" calibrate "$tmp/runs.jsonl" --hw a100-80g -o "$tmp/cal5.toml"
grep -q "cpu backend cannot calibrate a100-80g" "$tmp/err" || bad "CPU runs calibrating a GPU: $(cat "$tmp/err")"
printf '{"kernels": [' >"$tmp/trunc.jsonl"
expect_rc 2 "$LATHE" calibrate "$tmp/trunc.jsonl" --hw cpu-host -o "$tmp/cal3.toml"
# Edited runs: decode steps past the plan (costed step by step: 2^62 of them hung),
# a time that is not a number.
python3 -c "
import json
r = json.loads(open('$tmp/runs.jsonl').readline())
r['decode_steps'] = 2**62
open('$tmp/steps.jsonl', 'w').write(json.dumps(r) + '\n')
r = json.loads(open('$tmp/runs.jsonl').readline())
r['kernels'][0]['measured_ms'] = -1
open('$tmp/negtime.jsonl', 'w').write(json.dumps(r) + '\n')
"
expect_rc 2 "$LATHE" calibrate "$tmp/steps.jsonl" --hw cpu-host -o "$tmp/cal4.toml"
grep -q "decode_steps 4611686018427387904 is outside the plan's 0..5" "$tmp/err" || bad "calibrate with edited decode_steps: $(cat "$tmp/err")"
python3 -c "
import json
r = json.loads(open('$tmp/runs.jsonl').readline())
r['decode_steps'] = 2**62
r['plan']['gen'] = 2**62
open('$tmp/steps2.jsonl', 'w').write(json.dumps(r) + '\n')
"
expect_rc 2 "$LATHE" calibrate "$tmp/steps2.jsonl" --hw cpu-host -o "$tmp/cal6.toml"
grep -q "outside what lathe run accepts" "$tmp/err" || bad "calibrate with edited plan gen: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" calibrate "$tmp/negtime.jsonl" --hw cpu-host -o "$tmp/cal5.toml"
grep -q "measured_ms must be a number of milliseconds in \[0, 1e9\]" "$tmp/err" || bad "calibrate with a negative time: $(cat "$tmp/err")"
# A field of the wrong type names the field (nlohmann's message said only "type must
# be number, but is string").
python3 -c "
import json
r = json.loads(open('$tmp/runs.jsonl').readline())
r['prefill_ms'] = 'fast'
open('$tmp/strtime.jsonl', 'w').write(json.dumps(r) + '\n')
r = json.loads(open('$tmp/runs.jsonl').readline())
r['kernels'][1]['phase'] = 7
open('$tmp/intphase.jsonl', 'w').write(json.dumps(r) + '\n')
"
expect_rc 2 "$LATHE" calibrate "$tmp/strtime.jsonl" --hw cpu-host -o "$tmp/calstr.toml"
grep -q 'prefill_ms: "fast" is not a number' "$tmp/err" || bad "calibrate with a string time: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" calibrate "$tmp/intphase.jsonl" --hw cpu-host -o "$tmp/calstr.toml"
grep -q 'kernel phase: 7 is not a string' "$tmp/err" || bad "calibrate with a numeric phase: $(cat "$tmp/err")"
# Endless devices are refused before reading (calibrate and merge have no size limit:
# /dev/zero was read until memory ran out).
expect_rc 2 timeout 20 "$LATHE" calibrate /dev/zero --hw cpu-host -o "$tmp/caldev.toml"
grep -q "/dev/zero: is a device, not a file" "$tmp/err" || bad "calibrate /dev/zero: $(cat "$tmp/err")"
expect_rc 2 timeout 20 "$LATHE" merge /dev/zero -o "$tmp/merged9.csv"
grep -q "/dev/zero: is a device, not a file" "$tmp/err" || bad "merge /dev/zero: $(cat "$tmp/err")"
expect_rc 2 timeout 20 "$LATHE" serve-sim tiny h100-sxm --arrivals-csv /dev/urandom
grep -q "/dev/urandom: is a device, not a file" "$tmp/err" || bad "serve-sim --arrivals-csv /dev/urandom: $(cat "$tmp/err")"
sed 's/"measured_ms": [0-9.e+-]*/"measured_ms": 1e300/' "$tmp/onerun.jsonl" >"$tmp/hugetime.jsonl"
expect_rc 2 "$LATHE" calibrate "$tmp/hugetime.jsonl" --hw cpu-host -o "$tmp/cal7.toml"
grep -q "measured_ms must be a number of milliseconds in \[0, 1e9\]" "$tmp/err" || bad "calibrate with a 1e300 ms kernel: $(cat "$tmp/err")"
# A run whose times are all 0 was dropped from the fit without a word.
python3 -c "
import json, sys
lines = open(sys.argv[1]).read().splitlines()
j = json.loads(lines[0]); j['prefill_ms'] = 0; j['decode_ms'] = 0
for k in j['kernels']: k['measured_ms'] = 0
open(sys.argv[2], 'w').write('\n'.join([json.dumps(j)] + lines[1:]) + '\n')" "$tmp/runs.jsonl" "$tmp/zerotime.jsonl"
expect_rc 2 "$LATHE" calibrate "$tmp/zerotime.jsonl" --hw cpu-host -o "$tmp/cal9.toml"
grep -q "zerotime.jsonl:1: every measured time of the run is 0" "$tmp/err" || bad "calibrate with a run of zeros: $(cat "$tmp/err")"
sed 's/"measured_ms": [0-9.e+-]*/"measured_ms": NaN/' "$tmp/onerun.jsonl" >"$tmp/nantime.jsonl"
expect_rc 2 "$LATHE" calibrate "$tmp/nantime.jsonl" --hw cpu-host -o "$tmp/calstr.toml"
grep -q "nantime.jsonl:1: not valid JSON: parse error" "$tmp/err" && ! grep -q "json.exception" "$tmp/err" || bad "calibrate with NaN: $(cat "$tmp/err")"
# Runs that used 8-bit dot products (cpu_int8_dot, as lathe run records it): a CPU spec
# without an int8 peak is fitted with 4x its f32 peak (cpu-host: 4 x 0.768); runs that
# disagree keep the spec's model; a field that is not a boolean is an error.
# Only runs with integer weights use the peak: float runs alone leave the spec's (an
# assumed peak no kernel measured was written into the spec).
grep -q '"cpu_int8_dot"' "$tmp/runs.jsonl" || bad "lathe run --format json lacks cpu_int8_dot"
"$LATHE" run tiny --weights int8 --prompt-tokens 16 --gen 5 --per-op --format json >"$tmp/one.json" || bad "int8 run for calibration"
python3 -c "
import json
rs = [json.loads(l) for l in open('$tmp/runs.jsonl')]
f32 = [dict(r, cpu_int8_dot=True) for r in rs]
open('$tmp/dotf32.jsonl', 'w').write(''.join(json.dumps(r) + '\\n' for r in f32))
rs.append(json.load(open('$tmp/one.json')))
def write(name, values):
    with open('$tmp/' + name, 'w') as f:
        for r, v in zip(rs, values):
            r = dict(r); r['cpu_int8_dot'] = v; f.write(json.dumps(r) + '\n')
write('dot.jsonl', [True] * len(rs))
write('dotmix.jsonl', [True] + [False] * (len(rs) - 1))
write('dotbad.jsonl', ['yes'] * len(rs))
write('nodot.jsonl', [False] * len(rs))
"
expect_rc 0 "$LATHE" calibrate "$tmp/dot.jsonl" --hw cpu-host -o "$tmp/cal7.toml"
grep -q "lathe: note: .*fitted with peak_tflops.int8 = 4 x fp32 = 3.0720" "$tmp/err" || bad "calibrate ignores cpu_int8_dot: $(head -3 "$tmp/err")"
grep -q "^int8 = 3.072" "$tmp/cal7.toml" || bad "calibrated spec lacks the int8 peak: $(grep int8 "$tmp/cal7.toml")"
expect_rc 0 "$LATHE" calibrate "$tmp/dotf32.jsonl" --hw cpu-host -o "$tmp/cal7f.toml"
grep -q "fitted with peak_tflops.int8" "$tmp/err" && bad "float runs adopted an int8 peak: $(head -3 "$tmp/err")"
grep -Eq "^int8 = 0(\.0+)?$" "$tmp/cal7f.toml" || bad "float runs gave the spec an int8 peak: $(grep "^int8" "$tmp/cal7f.toml")"
# The "before" errors are those of the spec as given, with or without the adopted peak.
expect_rc 0 "$LATHE" calibrate "$tmp/nodot.jsonl" --hw cpu-host -o "$tmp/cal10.toml" --format json
cp "$tmp/out" "$tmp/plain.json"
expect_rc 0 "$LATHE" calibrate "$tmp/dot.jsonl" --hw cpu-host -o "$tmp/cal11.toml" --format json
python3 -c "
import json
a, b = json.load(open('$tmp/plain.json')), json.load(open('$tmp/out'))
assert a['int8_peak_from_runs'] is None and b['int8_peak_from_runs'] == 3.072, (a['int8_peak_from_runs'], b['int8_peak_from_runs'])
assert a['error']['train_before'] == b['error']['train_before'], (a['error'], b['error'])
" || bad "calibrate's before errors changed with the adopted int8 peak"
expect_rc 0 "$LATHE" calibrate "$tmp/dotmix.jsonl" --hw cpu-host -o "$tmp/cal8.toml" --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['int8_peak_from_runs'] is None and '1 of 5 runs used' in d['note'] and '4 did not' in d['note'], d" || bad "calibrate with mixed cpu_int8_dot"
grep -Eq "^int8 = 0(\.0+)?$" "$tmp/cal8.toml" || bad "mixed cpu_int8_dot runs gave the spec an int8 peak: $(grep "^int8" "$tmp/cal8.toml")"
expect_rc 2 "$LATHE" calibrate "$tmp/dotbad.jsonl" --hw cpu-host -o "$tmp/cal9.toml"
grep -q "cpu_int8_dot: .* is not true or false" "$tmp/err" || bad "calibrate with a bad cpu_int8_dot: $(cat "$tmp/err")"
# Edited plan fields and phases are errors (they fitted against the default plan), and
# runs whose times are all 0 have nothing to fit.
python3 -c "
import json
rs = [json.loads(l) for l in open('$tmp/runs.jsonl')]
def write(name, edit):
    with open('$tmp/' + name, 'w') as f:
        for r in rs:
            r = json.loads(json.dumps(r)); edit(r); f.write(json.dumps(r) + '\\n')
write('badkv.jsonl', lambda r: r['plan'].update(kv='int3'))
write('badlayout.jsonl', lambda r: r['plan'].update(kv_layout='XYZ'))
write('badact.jsonl', lambda r: r['plan'].update(act='int8'))
write('badphase.jsonl', lambda r: r['kernels'][0].update(phase='bogus'))
def zero(r):
    r['prefill_ms'] = r['decode_ms'] = 0
    for k in r['kernels']: k['measured_ms'] = 0
write('zero.jsonl', zero)
"
for c in "badkv:kv: unknown KV dtype 'int3'" "badlayout:kv_layout:" "badact:act: 'int8'" \
         "badphase:phase 'bogus'" "zero:zero.jsonl:1: every measured time of the run is 0"; do
  expect_rc 2 "$LATHE" calibrate "$tmp/${c%%:*}.jsonl" --hw cpu-host -o "$tmp/calbad.toml"
  grep -qF "${c#*:}" "$tmp/err" || bad "calibrate ${c%%:*}: $(cat "$tmp/err")"
done
[ -e "$tmp/calbad.toml" ] && bad "a refused calibration wrote its output"
expect_rc 2 "$LATHE" calibrate "$tmp/runs.jsonl" --hw cpu-host -o "$tmp/calbad.toml" --holdout 1
expect_rc 0 "$LATHE" calibrate "$tmp/runs.jsonl" --hw cpu-host -o "$tmp/cal12.toml" --holdout 0 --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['test_runs'] == 0 and d['error']['test_before'] is None, d['error']" || bad "calibrate without held-out runs reports a held-out error"

expect_rc 0 "$LATHE" tune tiny --reps 1 --steps 1 -o "$tmp/tuned-tiny.json" --format json
python3 - "$tmp/out" <<'PY' || bad "tune --format json lacks the candidates' times"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["all"] and all(e["candidates"] and all(c["us"] >= 0 for c in e["candidates"]) for e in d["all"]), d["all"]
assert d["compile_s"] >= 0 and d["margin"] > 0 and d["options"], d
PY
[ -s "$tmp/tuned-tiny.json" ] || bad "tune wrote no tuning file"
expect_rc 2 "$LATHE" tune tiny --backend cuda -o "$tmp/cuda-t.json"
grep -q "no CUDA device" "$tmp/err" || bad "tune --backend cuda without a GPU: $(cat "$tmp/err")"
[ -e "$tmp/cuda-t.json" ] && bad "tune --backend cuda without a GPU wrote a tuning file"
expect_rc 2 "$LATHE" tune tiny --backend tpu -o "$tmp/t.json"
grep -q "expected cpu or cuda" "$tmp/err" || bad "tune --backend tpu: $(cat "$tmp/err")"
# A CUDA tuning file: compile carries its parameters into the plan (the CPU kernels
# ignore them); lathe run on the CPU refuses it; values the kernels do not take are errors.
printf '{"format": "lathe-tuning", "version": 1, "backend": "cuda", "machine": "NVIDIA H200 (sm_90)", "entries": [{"kind": "decode_attention", "shape": "H=4 KVH=2 D=32 kv=f32 layout=LHTD cap=20", "params": {"tune_cuda_split": 3}}]}' >"$tmp/cudatune.json"
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 16 --gen 4 -o "$tmp/cudatuned" --tuning "$tmp/cudatune.json"
grep -q "applied 2 tuned cuda kernels" "$tmp/out" "$tmp/err" || bad "compile --tuning (cuda) applied nothing: $(cat "$tmp/out" "$tmp/err")"
grep -q "tune_cuda_split = 3" "$tmp/cudatuned/decode.ir" || bad "CUDA tuning parameters are not in the plan"
expect_rc 0 "$LATHE" run "$tmp/cudatuned" --gen 3
expect_rc 2 "$LATHE" run tiny --tuning "$tmp/cudatune.json" --gen 3
grep -q "tuning for the cuda backend" "$tmp/err" || bad "run --tuning with a cuda file on the CPU: $(cat "$tmp/err")"
printf '\001\002\377binary' >"$tmp/bintune.json"
expect_rc 2 "$LATHE" run tiny --tuning "$tmp/bintune.json" --gen 2
grep -q "bintune.json:1:1: not valid JSON" "$tmp/err" || bad "binary tuning file: $(cat -v "$tmp/err")"
expect_rc 0 "$LATHE" run tiny --gen 2 --top-k 5
grep -q "they are not applied" "$tmp/err" || bad "--top-k without --temperature: no warning"
sed 's/"tune_cuda_split": 3/"tune_cuda_split": 0/' "$tmp/cudatune.json" >"$tmp/badcudatune.json"
expect_rc 2 "$LATHE" compile tiny cpu-host -o "$tmp/cudatuned2" --tuning "$tmp/badcudatune.json"
grep -q "tune_cuda_split = 0 (expected 1 to 128)" "$tmp/err" || bad "bad CUDA tuning value: $(cat "$tmp/err")"
[ -e "$tmp/cudatuned2" ] && bad "compile with a bad tuning file wrote a plan"
expect_rc 2 "$LATHE" tune tiny -o "$tmp/no-such-dir/t.json"
grep -q "does not exist" "$tmp/err" || bad "tune -o into a missing directory: $(cat "$tmp/err")"
printf '{"format": "lathe-tuning", "version": 1, "backend": "cpu", "machine": "m", "entries": [{"kind": "decode_attention", "shape": "H=4 KVH=2 D=32 kv=f32 layout=LHTD", "params": {"tune_split": 2}}]}' >"$tmp/tune.json"
# Both backends' files on one plan; two files of one backend are an error; an entry
# that matches nothing (another KV capacity) is named.
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 16 --gen 4 -o "$tmp/bothtuned" --tuning "$tmp/cudatune.json" --tuning "$tmp/tune.json"
grep -q "tune_cuda_split = 3" "$tmp/bothtuned/decode.ir" && grep -q "tune_split = 2" "$tmp/bothtuned/decode.ir" \
  || bad "compile with a CPU and a CUDA tuning file did not apply both"
expect_rc 2 "$LATHE" compile tiny cpu-host -o "$tmp/twotuned" --tuning "$tmp/cudatune.json" --tuning "$tmp/cudatune.json"
grep -q "a second cuda tuning file" "$tmp/err" || bad "two CUDA tuning files: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 32 --gen 4 -o "$tmp/capmiss" --tuning "$tmp/cudatune.json"
grep -q "1 entry matched no kernel of this plan" "$tmp/out" || bad "an unmatched tuning entry is not named: $(cat "$tmp/out")"
expect_rc 0 "$LATHE" compile tiny cpu-host -o "$tmp/tuned" --tuning "$tmp/tune.json"
grep -q "applied 2 tuned cpu kernels" "$tmp/out" || bad "compile --tuning applied nothing: $(cat "$tmp/out")"
grep -q "tune_split" "$tmp/tuned/decode.ir" || bad "tuned parameters are not in the plan"
expect_rc 0 "$LATHE" run "$tmp/tuned" --gen 3
printf '{"format": "other"}' >"$tmp/badtune.json"
expect_rc 2 "$LATHE" compile tiny cpu-host -o "$tmp/tuned2" --tuning "$tmp/badtune.json"

# Hugging Face checkpoints: import-hf, and a config.json + *.safetensors directory
# wherever a model is named (docs/checkpoints.md).
HF=$SRC/tests/fixtures/hf
expect_rc 0 "$LATHE" import-hf "$HF/tiny-mixtral/config.json" -o "$tmp/mix.toml"
expect_rc 0 "$LATHE" check "$tmp/mix.toml"
grep -q "experts           4 x ffn 64, top-2" "$tmp/out" || bad "import-hf mixtral: $(cat "$tmp/out")"
expect_rc 0 "$LATHE" import-hf "$HF/tiny-llama"
grep -q '^arch = "llama"' "$tmp/out" || bad "import-hf to stdout: $(cat "$tmp/out")"
cp -r "$HF/tiny-llama" "$tmp/hfcopy"
expect_rc 2 "$LATHE" import-hf "$tmp/hfcopy" -o "$tmp/hfcopy/config.json"
grep -q "that is an input of this command" "$tmp/err" || bad "import-hf over its input: $(cat "$tmp/err")"
cmp -s "$tmp/hfcopy/config.json" "$HF/tiny-llama/config.json" || bad "import-hf replaced its config.json"
expect_rc 2 "$LATHE" weights convert "$tmp/hfcopy" -o "$tmp/hfcopy/$(basename "$(ls "$tmp"/hfcopy/*.safetensors | head -1)")"
grep -q "that is an input of this command" "$tmp/err" || bad "weights convert over its input: $(cat "$tmp/err")"
# Strings of config.json go into comment lines escaped: a newline in rope_type made TOML.
python3 -c "
import json, sys
c = json.load(open(sys.argv[1])); c['rope_scaling'] = {'rope_type': 'yarn\\n[model.rope_scaling]\\ntype = \"linear\"\\nfactor = 4.0\\n#', 'factor': 2.0}
json.dump(c, open(sys.argv[2], 'w'))" "$HF/tiny-llama/config.json" "$tmp/inject.json"
expect_rc 0 "$LATHE" import-hf "$tmp/inject.json" -o "$tmp/inject.toml"
[ "$(grep -c . "$tmp/err")" = 1 ] && grep -q 'yarn\\n\[model.rope_scaling\]' "$tmp/err" ||
  bad "import-hf warning with raw control characters: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" check "$tmp/inject.toml"
grep -q "scaling" "$tmp/out" && bad "a config.json string became TOML: $(cat "$tmp/out")"
grep -q '^# Note: .*yarn\\n\[model.rope_scaling\]' "$tmp/inject.toml" || bad "escaped note: $(head -3 "$tmp/inject.toml")"
expect_rc 2 "$LATHE" import-hf "$HF/tiny-llama" --name 'my model'
grep -q -- "--name: contains ' '" "$tmp/err" || bad "import-hf --name with a space: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" import-hf "$HF/tiny-llama" --name ''
grep -q -- "--name: an empty value" "$tmp/err" || bad "import-hf --name '': $(cat "$tmp/err")"
expect_rc 2 "$LATHE" import-hf "$HF/tiny-llama" -o ''
grep -q -- "--out: an empty value" "$tmp/err" || bad "import-hf -o '': $(cat "$tmp/err")"
expect_rc 0 "$LATHE" check "$HF/tiny-llama"
grep -q "tiny-llama" "$tmp/out" || bad "check HF dir: $(cat "$tmp/out")"
expect_rc 0 "$LATHE" check "$HF/tiny-mixtral/config.json" --format json
expect_rc 0 "$LATHE" simulate "$HF/tiny-mixtral" cpu-host --prompt 16 --gen 4
expect_rc 0 "$LATHE" compile "$HF/tiny-llama" cpu-host -o "$tmp/hfplan"
[ -f "$tmp/hfplan/plan.json" ] || bad "compile of an HF dir wrote no plan"
for m in tiny-llama tiny-mixtral; do
  want=$(python3 -c "import json; l=json.load(open('$HF/$m/reference_logits.json'))['logits'][0]; print(l.index(max(l)))")
  expect_rc 0 "$LATHE" run "$HF/$m" --tokens 17,203,5,88,141,9,250,33,64,120 --gen 2 --weights f32 --kv f32 --format json
  got=$(python3 -c "import json; print(json.load(open('$tmp/out'))['tokens'][0])")
  [ "$got" = "$want" ] || bad "run $m: first greedy token $got, transformers gives $want"
  grep -q "\"weights_from\": \"$HF/$m\"" "$tmp/out" || bad "run $m: weights_from is not the checkpoint"
done
# A config.json whose sizes disagree with the tensors is named as such, before the plan's
# memory is weighed (an FFN of 2e8 was reported as a plan that does not fit).
cp -r "$HF/tiny-llama" "$tmp/hfbig"
python3 -c "
import json, sys
c = json.load(open(sys.argv[1])); c['intermediate_size'] = 200000000
json.dump(c, open(sys.argv[1], 'w'))" "$tmp/hfbig/config.json"
expect_rc 2 "$LATHE" run "$tmp/hfbig" --gen 2 --prompt-tokens 4
grep -q "tensor 'model.layers.0.mlp.gate_proj.weight': shape \[128, 64\], but the model (config.json) needs \[200000000, 64\]" "$tmp/err" ||
  bad "run of a checkpoint whose config disagrees: $(cat "$tmp/err")"
# A bare config.json runs with synthetic weights (it was read as a plan.json); a JSON
# plan still runs from its plan.json.
expect_rc 0 "$LATHE" run "$HF/tiny-llama/config.json" --tokens 17,203,5 --gen 2 --format json
grep -q '"weights_from": "seed 1"' "$tmp/out" || bad "run of a bare config.json: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" run "$tmp/hfplan/plan.json" --gen 2
cp "$tmp/hfplan/plan.json" "$tmp/renamed-plan.json"
expect_rc 0 "$LATHE" run "$tmp/renamed-plan.json" --gen 2
expect_rc 2 "$LATHE" check "$tmp/hfplan/plan.json"
grep -q "a compiled lathe plan" "$tmp/err" || bad "check of a plan.json: $(cat "$tmp/err")"
printf '{"architectures": ["LlamaForCausalLM"],\n "hidden_size": 64}\n' >"$tmp/cfg.json"
expect_rc 2 "$LATHE" import-hf "$tmp/cfg.json" -o "$tmp/never.toml"
grep -q "cfg.json: num_hidden_layers: missing required key" "$tmp/err" || bad "import-hf missing key: $(cat "$tmp/err")"
[ ! -e "$tmp/never.toml" ] || bad "import-hf left a file behind after an error"
printf '{"architectures": ["GPT2LMHeadModel"]}' >"$tmp/gpt2.json"
expect_rc 2 "$LATHE" import-hf "$tmp/gpt2.json"
grep -q "gpt2.json:1:2: architectures: unsupported architecture 'GPT2LMHeadModel'" "$tmp/err" || bad "unsupported arch: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate "$tmp/gpt2.json" cpu-host
expect_rc 2 "$LATHE" import-hf "$HF/tiny-llama" -o "$tmp/no/such/dir/m.toml"
mkdir -p "$tmp/hfbad"
cp "$HF/tiny-mixtral/config.json" "$tmp/hfbad/"
head -c 100000 "$HF/tiny-mixtral/model.safetensors" >"$tmp/hfbad/model.safetensors"
expect_rc 2 "$LATHE" run "$tmp/hfbad" --tokens 1,2,3 --gen 2
grep -q "hfbad/model.safetensors: tensor '.*': data_offsets .* run past the end of the file" "$tmp/err" ||
  bad "truncated safetensors: $(cat "$tmp/err")"

# ---- outputs never replace inputs; located errors (a review of 2026-12-02) ----
mkdir -p "$tmp/io" && cp "$SRC/specs/models/tiny.toml" "$tmp/io/m.toml"
printf '[sweep]\nmodels = ["m.toml"]\nhardware = ["cpu-host"]\nprompt = [8]\ngen = [4]\n' >"$tmp/io/s.toml"
cp "$tmp/io/s.toml" "$tmp/io/s.keep"
expect_rc 2 "$LATHE" sweep "$tmp/io/s.toml" -o "$tmp/io/s.toml"
grep -q "that is an input of this command" "$tmp/err" && cmp -s "$tmp/io/s.toml" "$tmp/io/s.keep" || bad "sweep -o its own file: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" sweep "$tmp/io/s.toml" -o "$tmp/io/m.toml"
cmp -s "$tmp/io/m.toml" "$SRC/specs/models/tiny.toml" || bad "sweep -o overwrote its model"
expect_rc 0 "$LATHE" sweep "$tmp/io/s.toml" -o "$tmp/io/rows.csv"
cp "$tmp/io/rows.csv" "$tmp/io/rows.keep"
expect_rc 2 "$LATHE" merge "$tmp/io/rows.csv" -o "$tmp/io/rows.csv"
expect_rc 2 "$LATHE" merge "$tmp/io/rows.csv" --sweep "$tmp/io/s.toml" -o "$tmp/io/s.toml"
cmp -s "$tmp/io/rows.csv" "$tmp/io/rows.keep" && cmp -s "$tmp/io/s.toml" "$tmp/io/s.keep" || bad "merge -o overwrote an input"
expect_rc 2 "$LATHE" run "$tmp/io/m.toml" --gen 2 --prompt-tokens 3 --logits "$tmp/io/m.toml"
grep -q -- "--logits .*that is an input of this command" "$tmp/err" || bad "run --logits over its model: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" tune "$tmp/io/m.toml" -o "$tmp/io/m.toml"
cmp -s "$tmp/io/m.toml" "$SRC/specs/models/tiny.toml" || bad "tune/run overwrote the model"
expect_rc 2 "$LATHE" calibrate "$tmp/runs.jsonl" --hw cpu-host -o "$tmp/runs.jsonl"
grep -q "that is an input of this command" "$tmp/err" || bad "calibrate -o its runs: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" calibrate "$tmp/runs.jsonl" --hw cpu-host -o "$tmp/io/c.toml" --name 'a"b'
grep -q -- "--name: " "$tmp/err" && [ ! -e "$tmp/io/c.toml" ] || bad "calibrate --name with a quote: $(cat "$tmp/err")"
# --logits to a missing directory fails before the run, not after it.
expect_rc 2 "$LATHE" run tiny --gen 2 --prompt-tokens 3 --logits "$tmp/io/no/such/l.bin"
grep -q "does not exist" "$tmp/err" && ! grep -q "sequence 0" "$tmp/out" || bad "run --logits path checked late"
# A built-in model name wins over a directory of that name (a plan compiled to ./tiny).
(cd "$tmp/io" && mkdir -p tiny && "$LATHE" run tiny --gen 2 --prompt-tokens 3 >out.txt 2>err.txt) || bad "run tiny beside ./tiny: $(cat "$tmp/io/err.txt")"
# A config.json that breaks is named as JSON where it breaks, not as a bad plan file; a
# directory without config.json says what a model directory needs.
mkdir -p "$tmp/io/hf" && printf '{"hidden_size": 64,\n' >"$tmp/io/hf/config.json"
expect_rc 2 "$LATHE" run "$tmp/io/hf/config.json"
grep -q "config.json:2:1: not valid JSON: parse error" "$tmp/err" || bad "run of a broken config.json: $(cat "$tmp/err")"
mkdir -p "$tmp/io/empty"
expect_rc 2 "$LATHE" simulate "$tmp/io/empty" cpu-host
grep -q "a directory without config.json" "$tmp/err" || bad "simulate of a directory without config.json: $(cat "$tmp/err")"
# Two hardware specs of one name would be two columns of one label.
sed 's/^hbm_bandwidth_gbs = .*/hbm_bandwidth_gbs = 600/' "$SRC/specs/hardware/l4.toml" >"$tmp/io/l4copy.toml"
expect_rc 2 "$LATHE" whatif tiny --hw "l4,$tmp/io/l4copy.toml"
grep -q "are both named 'l4'" "$tmp/err" || bad "whatif columns of one name: $(cat "$tmp/err")"
# More SMs or a faster clock scale the peaks (sm_count=x2 made prefill slower); fields no
# time depends on are a warning.
expect_rc 0 "$LATHE" whatif llama-3-8b --hw h100-sxm,h100-sxm+sm_count=x2,h100-sxm+clock_mhz=x2,h100-sxm+smem_per_sm_kb=x4 --prompt 2048 --format json
python3 -c "
import json; d = json.load(open('$tmp/out'))
assert d[1]['prefill_ms'] < 0.6 * d[0]['prefill_ms'] and d[2]['prefill_ms'] < 0.6 * d[0]['prefill_ms'], d
assert d[3]['prefill_ms'] == d[0]['prefill_ms'], d" || bad "whatif sm_count/clock_mhz do not scale the peaks"
grep -q "smem_per_sm_kb is descriptive" "$tmp/err" || bad "no warning for a descriptive override: $(cat "$tmp/err")"
# Unfused, the KV layout still shapes the cache reads (kv_read was costed the same for all).
for l in LHTD TLHD; do
  expect_rc 0 "$LATHE" simulate llama-3-8b h100-sxm --no-fusion --batch 32 --prompt 4096 --allow-oom --kv-layout $l --format json
  cp "$tmp/out" "$tmp/io/nofuse-$l.json"
done
python3 -c "
import json; a, b = (json.load(open('$tmp/io/nofuse-%s.json' % l))['tpot_ms'] for l in ('LHTD', 'TLHD'))
assert b > 1.02 * a, (a, b)" || bad "--no-fusion: the KV layout does not change kv_read"
# serve-sim allocates a paged plan's own blocks (it used 16-token blocks beside paged:4096).
expect_rc 0 "$LATHE" serve-sim llama-3-8b l4 --kv-layout paged:4096 --requests 40 --rate 50 --prompt fixed:100 --output fixed:100 --format json
python3 -c "
import json; d = json.load(open('$tmp/out'))
assert d['policy']['kv_block'] == 4096 and d['series']['running']['peak'] <= 9, (d['policy'], d['series']['running']['peak'])" ||
  bad "serve-sim ignores the plan's paged block: $(head -c 300 "$tmp/out")"
expect_rc 2 "$LATHE" serve-sim llama-3-8b l4 --kv-layout paged:4096 --kv-block 16 --requests 20
grep -q "the plan's KV layout is paged:4096, blocks of 4096 positions" "$tmp/err" || bad "serve-sim --kv-block against paged: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" simulate llama-3-8b l4 --kv-layout paged:4096 --prompt 100 --gen 100 --batch 8
grep -q "8 x 200 tokens in bf16 (4096 held: whole blocks of 4096)" "$tmp/out" || bad "simulate's KV note hides paged blocks"
# Flags another policy reads are refused, not ignored; a trace's request is named by its line.
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --batching static --batch-timeout-ms 5 --requests 5
grep -q -- "--batch-timeout-ms: only the dynamic batcher reads it (batching is static" "$tmp/err" || bad "static + timeout: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --token-budget 512 --requests 5
expect_rc 2 "$LATHE" serve-sim llama-3-8b h100-sxm --router least-loaded --requests 5
expect_rc 0 "$LATHE" serve-sim llama-3-8b h100-sxm --router least-loaded --replicas 2 --requests 5
expect_rc 2 "$LATHE" moe-sim mixtral-8x7b h100-sxm --load uniform --zipf-skew 2
grep -q -- "--zipf-skew: needs --load zipf" "$tmp/err" || bad "moe-sim uniform + skew: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" moe-sim tiny-moe h100-sxm --context 255
grep -q "max_context" "$tmp/err" && bad "moe-sim --context 255 of 256 warned: $(cat "$tmp/err")"
printf '5,100,10\n6,100,10\n0,60000,10\n' >"$tmp/io/big3.csv"
expect_rc 2 "$LATHE" serve-sim llama-3-8b l4 --arrivals-csv "$tmp/io/big3.csv"
grep -q "request 0 (line 3 of the trace)" "$tmp/err" || bad "serve-sim names a trace request by its sorted index: $(cat "$tmp/err")"
# Pipelines and sweeps (an audit of compile/sweep/merge on 2026-12-02).
expect_rc 2 "$LATHE" compile tiny h100-sxm -o "$tmp/io/c7" --passes memory-plan,flash-attention
grep -q "pass 'memory-plan' must come last in the pipeline" "$tmp/err" && [ ! -e "$tmp/io/c7" ] || bad "memory-plan before a fusion: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate tiny h100-sxm --passes memory-plan,fuse-qkv
expect_rc 2 "$LATHE" compile tiny h100-sxm -o "$tmp/io/c8" --passes fuse-qkv --print-ir-after memory-plan
grep -q -- "--print-ir-after memory-plan: the pass does not run in this pipeline (fuse-qkv)" "$tmp/err" || bad "--print-ir-after a pass that does not run: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" compile tiny h100-sxm -o "$tmp/io/c9" --print-ir-after fuse-qkv
grep -q "^# ---- IR after fuse-qkv (prefill) ----$" "$tmp/out" || bad "--print-ir-after headers are not IR comments"
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["cpu-host"]\nprompt = [8]\ngen = [4]\nfusion = ["fuse-qkv+"]\n' >"$tmp/io/f.toml"
expect_rc 2 "$LATHE" sweep "$tmp/io/f.toml" -o "$tmp/io/f.csv"
grep -q "empty item in the fusion set 'fuse-qkv+'" "$tmp/err" || bad "a fusion set with a stray +: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" sweep "$tmp/io/s.toml" -o "$tmp/io/same.csv" --emit-best "$tmp/io/same.csv"
[ -e "$tmp/io/same.csv" ] && bad "sweep -o and --emit-best on one path left the rows"
expect_rc 0 "$LATHE" sweep "$tmp/io/s.toml" -o "$tmp/io/rows.JSONL"
head -c 1 "$tmp/io/rows.JSONL" | grep -q "{" || bad "-o rows.JSONL wrote CSV"
head -1 "$tmp/io/rows.csv" >"$tmp/io/hdr.csv"
expect_rc 2 "$LATHE" merge "$tmp/io/hdr.csv" -o "$tmp/io/mm.csv"
grep -q "the files hold no rows" "$tmp/err" && [ ! -e "$tmp/io/mm.csv" ] || bad "merge of no rows wrote a file: $(cat "$tmp/err")"
# --emit-best warns, as compile does, when the compiled plan needs more than the row's estimate.
printf '[sweep]\nmodels = ["llama-3-70b"]\nhardware = ["h100-sxm"]\ntp = [2]\nweights = ["int4:g128"]\nkv = ["int8"]\nbatch = [390, 392]\nprompt = [1000]\ngen = [100]\nobjectives = ["max memory_gb"]\n' >"$tmp/io/oom.toml"
expect_rc 0 "$LATHE" sweep "$tmp/io/oom.toml" -o "$tmp/io/oom.csv" --emit-best "$tmp/io/ebm"
grep -q "lathe: warning: the emitted plan: batch 392 does not fit on h100-sxm" "$tmp/err" || bad "--emit-best of a plan that does not fit: $(cat "$tmp/err")"
# advise's reproduce line is one a shell runs, paths with spaces included.
mkdir -p "$tmp/io/sp ace" && cp "$SRC/specs/models/tiny.toml" "$tmp/io/sp ace/my tiny.toml"
expect_rc 0 "$LATHE" advise "$tmp/io/sp ace/my tiny.toml" cpu-host --prompt 64 --gen 16 --format json
repro=$(python3 -c "import json; print(json.load(open('$tmp/out'))['reproduce'])")
eval "\"\$LATHE\" ${repro#lathe }" >/dev/null 2>"$tmp/io/repro.err" || bad "advise's reproduce line does not run: $repro $(cat "$tmp/io/repro.err")"
# run and tune take a --plan file's hardware and workload where the flags are silent.
printf '[plan]\nhardware = "a100-80g"\n[plan.workload]\nbatch = 3\nprompt = 5\ngen = 4\n' >"$tmp/io/rp.toml"
expect_rc 0 "$LATHE" run tiny --plan "$tmp/io/rp.toml" --format json
python3 -c "
import json; d = json.load(open('$tmp/out'))
assert d['batch'] == 3 and d['prompt_length'] == 5 and d['decode_steps'] == 3 and d['target'] == 'a100-80g', d" ||
  bad "run --plan ignores the plan's hardware or workload: $(head -c 300 "$tmp/out")"
expect_rc 0 "$LATHE" run tiny --plan "$tmp/io/rp.toml" --batch 1 --hw cpu-host --format json
python3 -c "
import json; d = json.load(open('$tmp/out'))
assert d['batch'] == 1 and d['prompt_length'] == 5 and d['target'] == 'cpu-host', d" || bad "run --plan: flags must win"
printf '[plan]\nhardware = "cpu-host"\n[plan.workload]\nbatch = 2\nprompt = 6\ngen = 3\n' >"$tmp/io/tp.toml"
expect_rc 0 "$LATHE" tune tiny --plan "$tmp/io/tp.toml" -o "$tmp/io/tune.json" --reps 1 --steps 1
python3 -c "
import json; w = json.load(open('$tmp/io/tune.json'))['workload']
assert (w['batch'], w['prompt'], w['gen']) == (2, 6, 3), w" || bad "tune --plan ignores the plan's workload"
# A compiled plan's KV room is checked before a kernel runs.
expect_rc 0 "$LATHE" compile tiny cpu-host --prompt 8 --gen 4 --batch 2 -o "$tmp/io/p2"
expect_rc 2 "$LATHE" run "$tmp/io/p2" --gen 50
grep -q -- "gen 50: sequence 0 needs 57 positions (8 prompt + 49 decode), but .*KV cache holds 12" "$tmp/err" &&
  ! grep -q "prefill" "$tmp/out" || bad "run of a plan past its KV cache: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" run "$tmp/io/p2" --gen 5
# calibrate rebuilds a run's plan from the model file the run read (a custom model was
# looked up by its name: unknown, or a built-in of the same name fitted silently).
# record_runs OUT MODEL: runs at prompts 8 and 16, one JSON line each, into OUT.
record_runs() {
  : >"$1"
  for p in 8 16; do
    "$LATHE" run "$2" --prompt-tokens $p --gen 4 --per-op --format json >"$tmp/io/one.json" || bad "run $2"
    python3 -c "import json; print(json.dumps(json.load(open('$tmp/io/one.json'))))" >>"$1"
  done
}
sed 's/^name = .*/name = "mymodel"/' "$SRC/specs/models/tiny.toml" >"$tmp/io/my.toml"
record_runs "$tmp/io/my.jsonl" "$tmp/io/my.toml"
expect_rc 0 "$LATHE" calibrate "$tmp/io/my.jsonl" --hw cpu-host -o "$tmp/io/mycal.toml" --holdout 0
sed -i 's/^name = .*/name = "renamed"/' "$tmp/io/my.toml"
expect_rc 2 "$LATHE" calibrate "$tmp/io/my.jsonl" --hw cpu-host -o "$tmp/io/mycal2.toml" --holdout 0
grep -q "is the model 'renamed', not the run's 'mymodel'" "$tmp/err" || bad "calibrate of a changed model file: $(cat "$tmp/err")"
# An edit that keeps the name is caught by the run's hash of the file; the model file a
# run names is an input calibrate never writes over.
sed -e 's/^name = .*/name = "mymodel"/' -e 's/^ffn = .*/ffn = 512/' "$SRC/specs/models/tiny.toml" >"$tmp/io/my.toml"
expect_rc 2 "$LATHE" calibrate "$tmp/io/my.jsonl" --hw cpu-host -o "$tmp/io/mycal2.toml" --holdout 0
grep -q "my.toml changed since the run" "$tmp/err" || bad "calibrate of an edited model file: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" calibrate "$tmp/io/my.jsonl" --hw cpu-host -o "$tmp/io/my.toml" --holdout 0
grep -q "that is an input of this command" "$tmp/err" || bad "calibrate -o over a run's model: $(cat "$tmp/err")"
# A compiled plan's runs calibrate against the plan's own graphs (a plan of a custom
# model was looked up by its name).
expect_rc 0 "$LATHE" compile "$tmp/io/my.toml" cpu-host --act f32 --prompt 16 --gen 4 -o "$tmp/io/myplan"
record_runs "$tmp/io/plan.jsonl" "$tmp/io/myplan"
expect_rc 0 "$LATHE" calibrate "$tmp/io/plan.jsonl" --hw cpu-host -o "$tmp/io/plancal.toml" --holdout 0
# tune -o never replaces the hardware spec a --plan file names.
cp "$SRC/specs/hardware/cpu-host.toml" "$tmp/io/myhw.toml"
printf '[plan]\nhardware = "myhw.toml"\n' >"$tmp/io/tp2.toml"
expect_rc 2 "$LATHE" tune tiny --plan "$tmp/io/tp2.toml" -o "$tmp/io/myhw.toml" --reps 1 --steps 1
cmp -s "$tmp/io/myhw.toml" "$SRC/specs/hardware/cpu-host.toml" || bad "tune -o replaced the plan file's hardware spec"

# serve-sim reserves activations for the batch a replica can run: --max-batch 2000 of
# 640-token requests reserved a 2000-sequence prefill's activations and left a cache of
# 116 sequences, where 450 fit beside their own.
expect_rc 0 "$LATHE" serve-sim llama-3-8b h100-sxm --batching static --max-batch 2000 --rate 10000 --requests 600 \
  --prompt fixed:512 --output fixed:128 --format json
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
b = d['runnable_max_batch']
assert d['max_batch'] == 2000 and 450 <= b < 2000, b
assert b * 640 <= d['kv_capacity_tokens'] and d['kv_capacity_tokens'] >= 450 * 640, (b, d['kv_capacity_tokens'])
assert d['series']['running']['peak'] <= b, d['series']['running']['peak']" "$tmp/out" || bad "serve-sim runnable batch: $(head -c 300 "$tmp/out")"
expect_rc 0 "$LATHE" serve-sim llama-3-8b h100-sxm --batching static --max-batch 2000 --rate 10000 --requests 600 \
  --prompt fixed:512 --output fixed:128
grep -q "max batch 2000 ([0-9]* run at most" "$tmp/out" || bad "serve-sim does not say the batch it runs: $(grep serving "$tmp/out")"
# A scenario file's key that only another policy than its own reads is an error where it
# is written (flags were refused; file keys ran without a word).
printf '[scenario]\nname = "p"\nkind = "serve"\nmodel = "llama-3-8b"\nhardware = "h100-sxm"\n[scenario.serve]\nbatching = "continuous"\ntoken_budget = 256\n' >"$tmp/io/policy.toml"
expect_rc 2 "$LATHE" serve-sim --scenario "$tmp/io/policy.toml" --requests 10
grep -q "policy.toml:8:.*token_budget: only chunked batching reads it" "$tmp/err" || bad "scenario token_budget beside continuous: $(cat "$tmp/err")"
# moe-sim: a prefill's context is its prompt, so --context beside --prompt was ignored.
expect_rc 2 "$LATHE" moe-sim --scenario moe-mixtral --prompt 512 --batch 8 --context 100000
grep -q -- "--context: a decode step's context" "$tmp/err" || bad "moe-sim --context with --prompt: $(cat "$tmp/err")"
# rag-sim refuses a flag only a mode it does not run reads.
expect_rc 2 "$LATHE" rag-sim --scenario rag-pipeline --modes sequential --timeout-ms 1
grep -q -- "--timeout-ms: only the timeout mode reads it" "$tmp/err" || bad "rag-sim --timeout-ms without the mode: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" rag-sim --scenario rag-pipeline --modes sequential,timeout --prefetch-hit 1
grep -q -- "--prefetch-hit: only the prefetch mode reads it" "$tmp/err" || bad "rag-sim --prefetch-hit without the mode: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" rag-sim --scenario rag-pipeline --modes timeout --timeout-ms 100
# advise keeps edge-sim's OS reserve on a unified-memory device (it filled all 64 GB of a
# Jetson, which edge-sim then called too big), and its reproduce line carries it.
expect_rc 0 "$LATHE" advise llama-3-8b jetson-agx-orin-64g --max-batch 64 --format json
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d['plan']['memory_gb'] <= 56.0 + 1e-9, d['plan']['memory_gb']
assert 'jetson-agx-orin-64g+memory_gb=56 ' in d['reproduce'], d['reproduce']" "$tmp/out" || bad "advise on unified memory: $(head -c 300 "$tmp/out")"
expect_rc 0 "$LATHE" advise llama-3-8b jetson-agx-orin-64g --max-batch 64 --os-reserve-gb 0 --format json
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert 'memory_gb=' not in d['reproduce'], d['reproduce']" "$tmp/out" || bad "advise --os-reserve-gb 0"
expect_rc 2 "$LATHE" advise llama-3-8b h100-sxm --os-reserve-gb 8
grep -q "has memory of its own" "$tmp/err" || bad "advise --os-reserve-gb on a discrete GPU: $(cat "$tmp/err")"

# advise's KV reason names what stopped the runner-up's batch: at 6.4 of 80 GB a TPOT SLO
# did, not the cache's size.
expect_rc 0 "$LATHE" advise llama-3-8b h100-sxm --slo-tpot 3 --format json
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
r = [i for i in d['recommendations'] if i['parameter'] == 'KV dtype'][0]['reason']
assert d['plan']['memory_gb'] < 40 and 'smaller cache fits' not in r and 'within the SLOs' in r, r" "$tmp/out" || bad "advise KV reason under a TPOT SLO: $(head -c 600 "$tmp/out")"

# Hand-edited plans the checks missed (each ran, exit 0, with other tokens): a layer-1
# node relabelled layer 0, RoPE theta or a norm's eps edited, eps = nan.
expect_rc 0 "$LATHE" compile tiny cpu-host --act f32 -o "$tmp/io/edits" --prompt 8 --gen 4
for edit in "0,/kv_heads = 2, layer = 1, theta/s//kv_heads = 2, layer = 0, theta/|its name says layer 1" \
  "s/, theta = 10000.0/, theta = 5.0/g|but the graph's rope_theta is 10000.0" \
  "s/eps = 1e-05/eps = nan/g|must be a positive number\|must be positive" \
  "0,/attr arena_bytes = [0-9]*/s//attr arena_bytes = 9223372036854775807/|exceeds the end of its highest buffer"; do
  rm -rf "$tmp/io/edited" && cp -r "$tmp/io/edits" "$tmp/io/edited"
  sed -i "${edit%%|*}" "$tmp/io/edited/plan.json"
  expect_rc 2 "$LATHE" run "$tmp/io/edited" --prompt-tokens 4 --gen 2
  grep -q "${edit#*|}" "$tmp/err" || bad "hand-edited plan (${edit%%|*}): $(cat "$tmp/err")"
done
# A directory that is neither a plan nor a checkpoint says so (its config.json was a
# directory and the error named DIR/plan.json).
mkdir -p "$tmp/io/notamodel/config.json"
expect_rc 2 "$LATHE" run "$tmp/io/notamodel" --prompt-tokens 4 --gen 2
grep -q "no plan.json (a compiled plan) and no config.json file.*its config.json is a directory" "$tmp/err" || bad "run of a directory with a config.json directory: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" moe-sim tiny-moe cpu-host --gpus 33
grep -q -- "--gpus 33 is outside \[1, 32\]" "$tmp/err" || bad "moe-sim --gpus past 8 per expert: $(cat "$tmp/err")"
# A JSON object naming a key twice (nlohmann keeps the last without a word).
mkdir -p "$tmp/io/dup" && printf '{"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "hidden_size": 4096}\n' >"$tmp/io/dup/config.json"
expect_rc 2 "$LATHE" import-hf "$tmp/io/dup/config.json" -o "$tmp/io/dup.toml"
grep -q 'key "hidden_size" appears twice in one object' "$tmp/err" || bad "duplicate JSON key: $(cat "$tmp/err")"
[ -e "$tmp/io/dup.toml" ] && bad "import-hf wrote a file for a config with a repeated key"
# Token counts are whole numbers of at least 1; a factor leaving no SM is an error.
expect_rc 2 "$LATHE" serve-sim tiny a100-80g --prompt fixed:0.4 --requests 3
grep -q -- "--prompt: token counts are whole numbers of at least 1" "$tmp/err" || bad "serve-sim fixed:0.4: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate tiny cpu-host --set sm_count=x0
grep -q "leaves fewer than one SM" "$tmp/err" || bad "sm_count=x0: $(cat "$tmp/err")"

# simulate --prefill-chunk: a 128k prompt in chunks of 8192 holds a chunk's activations.
expect_rc 0 "$LATHE" simulate llama-3.1-8b h200 --prompt 131072 --gen 2 --format json
cp "$tmp/out" "$tmp/io/whole.json"
expect_rc 0 "$LATHE" simulate llama-3.1-8b h200 --prompt 131072 --gen 2 --prefill-chunk 8192 --format json
python3 -c "
import json, sys
a, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a['prefill_chunk'] == 0 and c['prefill_chunk'] == 8192, (a['prefill_chunk'], c['prefill_chunk'])
assert c['memory_bytes']['activations'] < a['memory_bytes']['activations'] / 8
assert c['prefill_ms'] >= a['prefill_ms'] * 0.99 and c['max_batch'] > a['max_batch']" "$tmp/io/whole.json" "$tmp/out" || bad "simulate --prefill-chunk: $(head -c 300 "$tmp/out")"
expect_rc 0 "$LATHE" simulate llama-3-8b h200 --prompt 4096 --gen 2 --prefill-chunk 512
grep -q "prefill in 8 chunks of at most 512 tokens" "$tmp/out" || bad "simulate says no chunks: $(head -3 "$tmp/out")"
expect_rc 2 "$LATHE" simulate llama-3.1-8b h200 --prompt 131072 --prefill-chunk 1
grep -q "more than 65,536 chunks" "$tmp/err" || bad "prefill chunk of 1 over 128k: $(cat "$tmp/err")"

# calibrate: runs edited by hand fitted nonsense with exit 0. A plan field that is not a
# string (an int8 run read as f32), an unknown backend, a kernel listed twice, kernel
# times past their phase's.
python3 - "$tmp/runs.jsonl" "$tmp/io" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
def w(name, x): open(sys.argv[2] + "/" + name, "w").write(json.dumps(x) + "\n")
a = json.loads(json.dumps(r)); a["plan"]["weights"] = 8; w("wnum.jsonl", a)
b = json.loads(json.dumps(r)); b["backend"] = "tpu"; w("tpu.jsonl", b)
c = json.loads(json.dumps(r)); c["kernels"] = c["kernels"] + c["kernels"][:1]; w("dupk.jsonl", c)
d = json.loads(json.dumps(r))
for k in d["kernels"]: k["measured_ms"] = 1e8
w("bigk.jsonl", d)
PY
expect_rc 2 "$LATHE" calibrate "$tmp/io/wnum.jsonl" --hw cpu-host -o "$tmp/io/c.toml"
grep -q "wnum.jsonl:1: plan.weights: 8 is not a string" "$tmp/err" || bad "calibrate with a numeric plan.weights: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" calibrate "$tmp/io/tpu.jsonl" --hw cpu-host -o "$tmp/io/c.toml"
grep -q "backend: 'tpu' (lathe run writes cpu or cuda)" "$tmp/err" || bad "calibrate with backend tpu: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" calibrate "$tmp/io/dupk.jsonl" --hw cpu-host -o "$tmp/io/c.toml"
grep -q "kernel prefill/.* is listed twice" "$tmp/err" || bad "calibrate with a kernel twice: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" calibrate "$tmp/io/bigk.jsonl" --hw cpu-host -o "$tmp/io/c.toml"
grep -q "prefill kernels' measured_ms add up to .* more than the phase's prefill_ms" "$tmp/err" || bad "calibrate with kernel times past the phase: $(cat "$tmp/err")"
[ -e "$tmp/io/c.toml" ] && bad "a refused calibration wrote its spec"
# The default name of the calibrated spec must read back (a 125-character name grew past
# the limit), and -o may not land inside a compiled plan the runs name.
sed "s/^name = .*/name = \"$(printf 'h%.0s' $(seq 125))\"/" "$SRC/specs/hardware/cpu-host.toml" >"$tmp/io/longname.toml"
expect_rc 0 "$LATHE" check "$tmp/io/longname.toml"
expect_rc 2 "$LATHE" calibrate "$tmp/runs.jsonl" --hw "$tmp/io/longname.toml" -o "$tmp/io/c.toml"
grep -q "default name .* give --name" "$tmp/err" || bad "calibrate's default name too long: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" compile tiny cpu-host -o "$tmp/io/cplan"
"$LATHE" run "$tmp/io/cplan" --prompt-tokens 8 --gen 3 --per-op --format json 2>/dev/null |
  python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)))" >"$tmp/io/prun.jsonl"
cp "$tmp/io/cplan/prefill.ir" "$tmp/io/prefill.ir.before"
expect_rc 2 "$LATHE" calibrate "$tmp/io/prun.jsonl" --hw cpu-host -o "$tmp/io/cplan/prefill.ir"
grep -q "inside the plan directory" "$tmp/err" || bad "calibrate -o into the plan: $(cat "$tmp/err")"
cmp -s "$tmp/io/cplan/prefill.ir" "$tmp/io/prefill.ir.before" || bad "calibrate replaced the plan's IR"
python3 - "$tmp/runs.jsonl" "$tmp/io" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
r["plan"]["pipeline"] = "fuse_norm_matmul"
open(sys.argv[2] + "/pipe.jsonl", "w").write(json.dumps(r) + "\n")
open(sys.argv[2] + "/bom.jsonl", "w", encoding="utf-8-sig").write(open(sys.argv[1]).readline())
PY
expect_rc 2 "$LATHE" calibrate "$tmp/io/pipe.jsonl" --hw cpu-host -o "$tmp/io/c.toml"
grep -q 'plan.pipeline: "fuse_norm_matmul" is not a list of pass names' "$tmp/err" || bad "calibrate with a string pipeline: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" calibrate "$tmp/io/bom.jsonl" --hw cpu-host -o "$tmp/io/c.toml"
grep -q "got a UTF-8 byte-order mark" "$tmp/err" || bad "calibrate of a file with a BOM: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" calibrate "$tmp/runs.jsonl" --hw cpu-host -o "$tmp/io/c.toml" --name ""
# probe --device is the CUDA backend's (ignored on the CPU).
expect_rc 2 "$LATHE" probe --device 5
grep -q -- "--device: a CUDA device; with the CPU backend there is none" "$tmp/err" || bad "probe --device on the CPU: $(cat "$tmp/err")"
# tune: a plan file's gen below 2 is an error, as the flag's is (it ran as 2).
printf '[plan]\nmodel = "tiny"\nhardware = "cpu-host"\n[plan.workload]\ngen = 1\n' >"$tmp/io/gen1.toml"
expect_rc 2 "$LATHE" tune tiny --plan "$tmp/io/gen1.toml" --reps 1 --steps 1 -o "$tmp/io/t.json"
grep -q "plan.workload.gen = 1 is outside what .lathe tune. takes (2..65536)" "$tmp/err" || bad "tune with a plan file's gen 1: $(cat "$tmp/err")"
# compute_capability as a whole number: 10 and 12 are sm_100 and sm_120 (read as 1.0 and
# 1.2); two decimals are an error (7.55 was rounded to sm_76).
for cc in "10 sm_100" "12 sm_120" "9 sm_90" "89 sm_89"; do
  set -- $cc
  sed "s/^compute_capability = .*/compute_capability = $1/" "$SRC/specs/hardware/a100-40g.toml" >"$tmp/io/cc.toml"
  expect_rc 0 "$LATHE" check "$tmp/io/cc.toml"
  grep -q "$2" "$tmp/out" || bad "compute_capability = $1 is not $2: $(grep -o 'sm_[0-9]*' "$tmp/out")"
done
sed "s/^compute_capability = .*/compute_capability = 7.55/" "$SRC/specs/hardware/a100-40g.toml" >"$tmp/io/cc.toml"
expect_rc 2 "$LATHE" check "$tmp/io/cc.toml"
grep -q "compute_capability: expected a version" "$tmp/err" || bad "compute_capability 7.55: $(cat "$tmp/err")"
# import-hf: a config.json without _name_or_path is named after its directory however
# the path is written (inside it, "config.json" gave "config" and "." gave "hf-model");
# an error in a nested rope_parameters names its own line, not the top-level key's.
mkdir -p "$tmp/io/my-llama"
python3 - "$SRC/tests/fixtures/hf/tiny-llama/config.json" "$tmp/io/my-llama/config.json" "$tmp/io/rope.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d.pop("_name_or_path", None)
json.dump(d, open(sys.argv[2], "w"), indent=2)
d["rope_theta"] = 500000.0
d["rope_parameters"] = {"rope_type": "llama3", "rope_theta": -5.0}
json.dump(d, open(sys.argv[3], "w"), indent=2)
PY
for p in config.json ./config.json . "$tmp/io/my-llama/config.json"; do
  (cd "$tmp/io/my-llama" && "$LATHE" import-hf "$p") >"$tmp/out" 2>"$tmp/err"
  grep -q '^name = "my-llama"' "$tmp/out" || bad "import-hf $p names the model $(grep '^name' "$tmp/out")"
done
expect_rc 2 "$LATHE" import-hf "$tmp/io/rope.json"
line=$(grep -n '"rope_theta": -5.0' "$tmp/io/rope.json" | cut -d: -f1)
grep -q "rope.json:$line:[0-9]*: rope_parameters.rope_theta: expected a number" "$tmp/err" || bad "nested rope_theta error location (line $line): $(cat "$tmp/err")"

# merge: a last line without its newline was cut off (a cost cut to "0.00" ranked first);
# CRLF line ends and a UTF-8 BOM are read (a CRLF header was "not the header").
printf '[sweep]\nname = "s1"\nmodels = ["tiny"]\nhardware = ["a100-80g"]\nbatch = [1, 2]\nprompt = [32]\ngen = [16]\n' >"$tmp/io/s1.toml"
expect_rc 0 "$LATHE" sweep "$tmp/io/s1.toml" -o "$tmp/io/s1.csv"
head -c -3 "$tmp/io/s1.csv" >"$tmp/io/cut.csv"
expect_rc 2 "$LATHE" merge "$tmp/io/cut.csv" -o "$tmp/io/m.csv"
grep -q "cut.csv:3: the last line ends without a newline" "$tmp/err" || bad "merge of a cut row: $(cat "$tmp/err")"
[ -e "$tmp/io/m.csv" ] && bad "a refused merge wrote its file"
{ printf '\xef\xbb\xbf'; sed 's/$/\r/' "$tmp/io/s1.csv"; } >"$tmp/io/crlf.csv"
expect_rc 0 "$LATHE" merge "$tmp/io/crlf.csv" -o "$tmp/io/m.csv"
cmp -s "$tmp/io/m.csv" "$tmp/io/s1.csv" || bad "merge of a CRLF file with a BOM differs from the rows"
# An empty -o, --shard or --emit-best is an error (an unset "$OUT" lost the rows).
expect_rc 2 "$LATHE" sweep "$tmp/io/s1.toml" -o ""
expect_rc 2 "$LATHE" sweep "$tmp/io/s1.toml" --shard "" -o "$tmp/io/e.csv"
expect_rc 2 "$LATHE" sweep "$tmp/io/s1.toml" --emit-best ""
# --samples is bounded: its points are held in memory (2^40 ran until memory ran out).
printf '[sweep]\nmodels = ["tiny"]\nhardware = ["a100-80g"]\nbatch = { from = 1, to = 1048576 }\nprompt = { from = 1, to = 16777216 }\ngen = [16]\n' >"$tmp/io/huge.toml"
expect_rc 2 timeout 60 "$LATHE" sweep "$tmp/io/huge.toml" --samples 1099511627776 -o "$tmp/io/h.csv"
grep -q -- "--samples: 1099511627776 is outside \[1, 100000000\]" "$tmp/err" || bad "sweep --samples 2^40: $(cat "$tmp/err")"
# advise at gen 1 shows no TPOT: no decode step runs.
expect_rc 0 "$LATHE" advise tiny a100-80g --prompt 64 --gen 1 --max-batch 8
grep -q "no decode step (gen 1)" "$tmp/out" && ! grep -q "TPOT" "$tmp/out" || bad "advise --gen 1 shows a TPOT: $(grep -m2 TPOT "$tmp/out")"
# The roofline holds every kernel inside the plot at its own rate (an all-reduce at 0.8
# GFLOP/s was drawn at the bottom edge, 4 GFLOP/s) and every roof inside the frame (a
# what-if bandwidth past the ridge drew one left of the axis).
expect_rc 0 "$LATHE" simulate llama-3-70b h100-sxm --tp 4 --plot "$tmp/io/r70.svg"
expect_rc 0 "$LATHE" simulate llama-3-8b h100-sxm --set hbm_bandwidth_gbs=1e8 --plot "$tmp/io/rbw.svg"
expect_rc 0 "$LATHE" simulate llama-3-8b h100-sxm --set hbm_bandwidth_gbs=2 --plot "$tmp/io/rslow.svg"
python3 - "$tmp/io/rslow.svg" <<'PY' || bad "roofs with their ridges right of the plot are not the one slope"
import sys, xml.etree.ElementTree as E
lines = {p.get("points") for p in E.parse(sys.argv[1]).getroot().iter("{http://www.w3.org/2000/svg}polyline")}
assert len(lines) == 1 and len(next(iter(lines)).split()) == 2, lines
PY
python3 - "$tmp/io/r70.svg" "$tmp/io/rbw.svg" <<'PY' || bad "roofline points or roofs outside the plot"
import sys, xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
for f in sys.argv[1:]:
    root = E.parse(f).getroot()
    for c in root.iter(ns + "circle"):
        assert 50 <= float(c.get("cy")) < 540 - 1e-6, (f, c.get("cy"), c.find(ns + "title").text)
    for p in root.iter(ns + "polyline"):
        for xy in p.get("points").split():
            x, y = map(float, xy.split(","))
            assert 80 - 1e-6 <= x <= 720 + 1e-6 and 50 - 1e-6 <= y <= 540 + 1e-6, (f, xy)
PY
# --per-op shares add up to about 100% however many rows (1,600 rows summed to 88%).
expect_rc 0 "$LATHE" simulate llama-3-70b h100-sxm --tp 4 --per-op
python3 - "$tmp/out" <<'PY' || bad "per-op shares do not add up"
import re, sys
tot = {}
text = open(sys.argv[1]).read()
assert "Per kernel" in text
for line in text.split("Per kernel", 1)[1].splitlines():
    f = line.split()
    pc = [x for x in f if re.fullmatch(r"[0-9.]+%", x)]  # share is the first percentage
    if f and f[0] in ("prefill", "decode") and pc:
        tot[f[0]] = tot.get(f[0], 0) + float(pc[0][:-1])
assert set(tot) == {"prefill", "decode"} and all(abs(v - 100) < 1.0 for v in tot.values()), tot
PY

# moe-sim: --context picks a decode step over a scenario file's prefill prompt (the file
# won and the flag was ignored).
sed 's/^context = 1024$/prompt = 512/' "$SRC/specs/scenarios/moe-mixtral.toml" >"$tmp/io/moep.toml"
expect_rc 0 "$LATHE" moe-sim --scenario "$tmp/io/moep.toml" --context 2048 --samples 8 --format json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['context'] == 2048 and d['prompt'] == 0, (d['context'], d['prompt'])" "$tmp/out" || bad "moe-sim --context beside a file's prompt: $(head -c 300 "$tmp/out")"

# merge --sweep holds a row's formats to its point's, as it does its model and batch.
python3 - "$tmp/io/s1.csv" "$tmp/io/s1w.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
rows[1][rows[0].index("weights")] = "int4:g128"
csv.writer(open(sys.argv[2], "w"), lineterminator="\n").writerows(rows)
PY
expect_rc 2 "$LATHE" merge "$tmp/io/s1w.csv" -o "$tmp/io/m3.csv" --sweep "$tmp/io/s1.toml"
grep -q "s1w.csv:2: point 0 has weights int4:g128, but the sweep's point 0 has f32" "$tmp/err" || bad "merge of a row with edited weights: $(cat "$tmp/err")"
expect_rc 0 "$LATHE" merge "$tmp/io/s1.csv" -o "$tmp/io/m3.csv" --sweep "$tmp/io/s1.toml"
printf '[1]\n' >"$tmp/io/arr.jsonl"
expect_rc 2 "$LATHE" merge "$tmp/io/arr.jsonl" -o "$tmp/io/m2.csv"
grep -q "arr.jsonl: a JSON array; lathe reads rows as CSV or JSONL" "$tmp/err" || bad "merge of a JSON array: $(cat "$tmp/err")"

# An output file that is standard output carries the output alone (the report mixed into
# it); an output file elsewhere leaves the report on stdout.
"$LATHE" sweep "$tmp/io/s1.toml" -o /dev/stdout 2>/dev/null >"$tmp/io/rows-stdout.csv"
cmp -s "$tmp/io/rows-stdout.csv" "$tmp/io/s1.csv" || bad "sweep -o /dev/stdout: $(head -3 "$tmp/io/rows-stdout.csv")"
"$LATHE" simulate tiny a100-80g --prompt 64 --gen 8 --trace /dev/stdout 2>/dev/null |
  python3 -c "import json, sys; json.load(sys.stdin)" || bad "simulate --trace /dev/stdout is not the trace alone"
expect_rc 0 "$LATHE" simulate tiny a100-80g --prompt 64 --gen 8 --trace "$tmp/io/t2.json"
grep -q "^lathe simulate: tiny on a100-80g" "$tmp/out" || bad "simulate's report left stdout: $(head -2 "$tmp/out")"

# Plan files: --tp 1 and --passes default override a file's tp and pipeline (1 and
# "default" read as "not given"); run and tune take MODEL from the file; a file's gen 0
# is refused by run as the flag is; pipeline lists are checked where they are written.
printf '[plan]\nmodel = "llama-3-8b"\nhardware = "a100-80g"\ntp = 2\npipeline = "none"\n' >"$tmp/io/ptp.toml"
expect_rc 0 "$LATHE" simulate --plan "$tmp/io/ptp.toml" --tp 1 --passes default --format json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['tp'] == 1 and '0 passes' not in d['options'], (d['tp'], d['options'])" "$tmp/out" || bad "--tp 1 / --passes default beside a plan file: $(head -c 300 "$tmp/out")"
printf '[plan]\nmodel = "tiny"\nhardware = "cpu-host"\n[plan.workload]\nprompt = 8\ngen = 3\n' >"$tmp/io/prun.toml"
expect_rc 0 "$LATHE" run --plan "$tmp/io/prun.toml"
grep -q "tiny" "$tmp/out" || bad "run --plan without MODEL: $(head -3 "$tmp/out")"
printf '[plan]\nmodel = "tiny"\nhardware = "cpu-host"\n[plan.workload]\nprompt = 8\ngen = 0\n' >"$tmp/io/pg0.toml"
expect_rc 2 "$LATHE" run --plan "$tmp/io/pg0.toml"
grep -q "plan.workload.gen = 0 is outside" "$tmp/err" || bad "run with a plan file's gen 0: $(cat "$tmp/err")"
for bad in '" , ,"' '"fuse-qkv,,kv-layout"' '"fuse-qkv, fuse-qkv"' '"memory-plan, fuse-qkv"'; do
  printf '[plan]\nmodel = "tiny"\npipeline = %s\n' "$bad" >"$tmp/io/pp.toml"
  expect_rc 2 "$LATHE" check "$tmp/io/pp.toml"
  grep -q "pp.toml:3:[0-9]*: plan.pipeline: " "$tmp/err" || bad "plan pipeline $bad: $(cat "$tmp/err")"
done
expect_rc 0 "$LATHE" check "$tmp/io/ptp.toml"
grep -q "pipeline          none (no optimization pass)" "$tmp/out" && grep -q "^  act " "$tmp/out" || bad "check of a plan omits its pipeline or act: $(cat "$tmp/out")"
# A plan file's unknown or empty model name is located (the commands named no line).
printf '[plan]\nmodel = "tinyy"\nhardware = "cpu-host"\n' >"$tmp/io/pm.toml"
expect_rc 2 "$LATHE" simulate --plan "$tmp/io/pm.toml"
grep -q "pm.toml:2:9: plan.model: 'tinyy' is neither a built-in model nor a file (did you mean 'tiny'?)" "$tmp/err" || bad "plan with an unknown model: $(cat "$tmp/err")"
printf '[plan]\nmodel = ""\n' >"$tmp/io/pm.toml"
expect_rc 2 "$LATHE" check "$tmp/io/pm.toml"
grep -q "pm.toml:2:9: plan.model: an empty name" "$tmp/err" || bad "plan with an empty model: $(cat "$tmp/err")"
# attention = "flash" with the pass off is refused, as weights/kv/kv_layout are.
printf '[plan]\nmodel = "tiny"\nattention = "flash"\n[plan.passes]\nflash-attention = false\n' >"$tmp/io/pf.toml"
expect_rc 2 "$LATHE" check "$tmp/io/pf.toml"
grep -q "pf.toml:3:[0-9]*: plan.attention: \"flash\" needs the flash-attention pass" "$tmp/err" || bad "attention flash without its pass: $(cat "$tmp/err")"
printf '[plan]\nmodel = "tiny"\nattention = "flash"\npipeline = "none"\n' >"$tmp/io/pf.toml"
expect_rc 2 "$LATHE" check "$tmp/io/pf.toml"
printf '[plan]\nmodel = "tiny"\nattention = "flash"\npipeline = "fuse-qkv, flash-attention"\n' >"$tmp/io/pf.toml"
expect_rc 0 "$LATHE" check "$tmp/io/pf.toml"
# serve-sim says a plan file's workload is not its own.
expect_rc 0 "$LATHE" serve-sim --plan "$tmp/io/prun.toml" --requests 4
grep -q "\[plan.workload\] is ignored by the serve simulation" "$tmp/err" || bad "serve-sim --plan with a workload: $(cat "$tmp/err")"
# run: threads past what the host starts are an error, not an abort; an attention scale
# edited in plan.json is refused; empty flag values are errors.
expect_rc 2 bash -c "ulimit -v 4000000; exec \"$LATHE\" run tiny --threads 1024 --gen 2"
grep -q "could not start worker thread" "$tmp/err" || bad "run --threads 1024 under a memory limit: $(tail -2 "$tmp/err")"
expect_rc 0 "$LATHE" compile tiny cpu-host -o "$tmp/io/psc"
python3 - "$tmp/io/psc/plan.json" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
t2, n = re.subn(r'scale = 0\.17677669529663\d*', 'scale = 1.0', t)  # in the plan's IR text
assert n > 0, "no attention scale in the plan"
open(sys.argv[1], "w").write(t2)
PY
expect_rc 2 "$LATHE" run "$tmp/io/psc" --gen 2
grep -q "scale = 1.*, but attention scales by 1 / sqrt(head_dim" "$tmp/err" || bad "an edited attention scale: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run tiny --logits ""
expect_rc 2 "$LATHE" compile tiny cpu-host -o "$tmp/io/pe" --tuning ""

[ $fail -eq 0 ] && echo "cli contract holds"
exit $fail
