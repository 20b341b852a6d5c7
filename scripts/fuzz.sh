#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + ASan/UBSan and runs each for SECONDS
# (default 60): the spec frontend, IR parser, sweep, plan and tuning files over a seed corpus
# made from the built-in specs, sweeps, their IR and a compiled plan; the GGUF fuzzer
# over small GGUF files written by `lathe weights init`; then the safetensors reader
# and config.json import over the Hugging Face fixtures (tests/fixtures/hf).
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
B=build-fuzz
if [ ! -f $B/build.ninja ]; then
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
    -DCMAKE_CXX_COMPILER=clang++-14 -DLATHE_FUZZ=ON -DLATHE_TESTS=OFF -DLATHE_BENCH=OFF \
    -DLATHE_WITH_JIT=OFF -DLATHE_WITH_CUDA=OFF
fi
cmake --build $B --target spec_fuzzer gguf_fuzzer safetensors_fuzzer lathe
corpus=$B/corpus; mkdir -p $corpus
i=0
for f in specs/models/*.toml specs/hardware/*.toml specs/plans/*.toml specs/scenarios/*.toml; do
  [ -f "$f" ] || continue
  for sel in 0 1 2 3 5; do { printf "\\x0$sel"; cat "$f"; } >"$corpus/seed-$i-$sel"; done
  i=$((i + 1))
done
for f in specs/sweeps/*.toml; do { printf '\x06'; cat "$f"; } >"$corpus/seed-sweep-$(basename "$f")"; done
rm -rf $B/plan-seed && $B/cli/lathe compile tiny-moe cpu-host --prompt 8 --gen 4 -o $B/plan-seed >/dev/null
{ printf '\x07'; cat $B/plan-seed/plan.json; } >"$corpus/seed-plan-tiny-moe"
{ printf '\x04'; $B/cli/lathe graph tiny; } >"$corpus/seed-ir-tiny"
printf '\x08{"format": "lathe-tuning", "version": 1, "backend": "cuda", "machine": "m", "entries": [{"kind": "gemv", "shape": "K=128 N=128 w=bf16 pro=none epi=residual", "params": {"tune_cuda_warps": 16, "tune_cuda_loads": 2}, "default_us": 2.5, "best_us": 2.1}]}' >"$corpus/seed-tuning-cuda"
printf '\x08{"format": "lathe-tuning", "version": 1, "backend": "cpu", "entries": [{"kind": "gemm", "shape": "x", "params": {"tune_cols": 64}}]}' >"$corpus/seed-tuning-cpu"
{ printf '\x04'; $B/cli/lathe graph tiny-moe --phase prefill; } >"$corpus/seed-ir-moe"
$B/fuzz/spec_fuzzer "$corpus" -max_total_time="$secs" -max_len=65536 -timeout=5 -print_final_stats=1

gcorpus=$B/corpus-gguf; mkdir -p $gcorpus
for w in q8_0 q4_0; do
  $B/cli/lathe weights init tests/gguf/fixtures/micro.toml --seed 1 --weights $w -o $gcorpus/seed-micro-$w.gguf >/dev/null
done
cp tests/gguf/fixtures/spm-vocab.gguf tests/gguf/fixtures/bpe-vocab.gguf $gcorpus/
$B/fuzz/gguf_fuzzer "$gcorpus" -max_total_time="$secs" -max_len=200000 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
hf=$B/corpus-hf; mkdir -p $hf
i=0
for f in tests/fixtures/hf/*/*.safetensors; do { printf '\x00'; cat "$f"; } >"$hf/seed-st-$i"; i=$((i + 1)); done
for f in tests/fixtures/hf/*/config.json; do { printf '\x01'; cat "$f"; } >"$hf/seed-cfg-$i"; i=$((i + 1)); done
$B/fuzz/safetensors_fuzzer "$hf" -max_total_time="$secs" -max_len=400000 -timeout=5 -print_final_stats=1
