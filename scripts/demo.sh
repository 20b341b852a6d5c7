#!/usr/bin/env bash
# README command 1: set up, build, and run lathe's main job on built-in defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
LATHE=${LATHE_BUILD_DIR:-build}/cli/lathe
mkdir -p build/demo

echo; echo "== lathe specs: the built-in library"
"$LATHE" specs

echo; echo "== lathe check llama-3-8b"
"$LATHE" check llama-3-8b

echo; echo "== lathe graph llama-3-8b --phase decode (first layer shown; full graph in build/demo/llama-3-8b.decode.ir)"
"$LATHE" graph llama-3-8b --phase decode >build/demo/llama-3-8b.decode.ir
grep -v -E '^(weight @layers\.([1-9]|[12][0-9]|3[01])\.|  node l([1-9]|[12][0-9]|3[01])\.)' build/demo/llama-3-8b.decode.ir

echo; echo "== lathe simulate llama-3-8b a100-80g --batch 1 --prompt 2048 --gen 128"
"$LATHE" simulate llama-3-8b a100-80g --batch 1 --prompt 2048 --gen 128

echo; echo "== lathe probe: this machine's bandwidth and FMA peak (the CPU prediction target)"
"$LATHE" probe -o build/demo/this-cpu.toml

echo; echo "== lathe run small: real prefill and decode on the CPU, measured beside predicted"
"$LATHE" run small --prompt-tokens 32 --gen 16 --hw build/demo/this-cpu.toml
