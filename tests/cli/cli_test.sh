#!/usr/bin/env bash
# The command-line contract: exit codes, located errors, --help everywhere.
# Usage: cli_test.sh PATH/TO/lathe
set -u
LATHE=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# expect_rc WANT CMD... : run and compare the exit code
expect_rc() {
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  [ "$rc" -eq "$want" ] || bad "exit $rc (want $want): $* :: $(head -c 300 "$tmp/err")"
}

expect_rc 0 "$LATHE" --help
for c in $("$LATHE" --help | awk '/^SUBCOMMANDS:/{s=1;next} s&&NF{print $1}'); do
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

[ $fail -eq 0 ] && echo "cli contract holds"
exit $fail
