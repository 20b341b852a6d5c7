#!/usr/bin/env bash
# GGUF files on the command line: weights init, run/check/simulate/compile on .gguf,
# the same tokens as the synthetic model of the same seed, and exit 2 on bad files.
# Usage: gguf_cli_test.sh PATH/TO/lathe
set -u
LATHE=$1
. "$(dirname "$0")/common.sh"
export LATHE_CACHE_DIR="$tmp/cache"
tokens_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$1"; }

# The GGUF of seed 7 runs like the synthetic model of seed 7, in every format.
for w in f32 f16 q8_0 q4_0; do
  expect_rc 0 "$LATHE" weights init tiny --seed 7 --weights $w -o "$tmp/tiny-$w.gguf"
  [ -s "$tmp/tiny-$w.gguf" ] || bad "weights init $w wrote nothing"
  expect_rc 0 "$LATHE" run "$tmp/tiny-$w.gguf" --tokens 1,2,3,4 --gen 8 --threads 2 --format json
  cp "$tmp/out" "$tmp/gguf-$w.json"
  case $w in q8_0) fmt=int8:g32 ;; q4_0) fmt=int4:g32 ;; *) fmt=$w ;; esac
  expect_rc 0 "$LATHE" run tiny --seed 7 --weights $fmt --tokens 1,2,3,4 --gen 8 --threads 2 --format json
  [ "$(tokens_of "$tmp/gguf-$w.json")" = "$(tokens_of "$tmp/out")" ] ||
    bad "$w: gguf tokens $(tokens_of "$tmp/gguf-$w.json") differ from the synthetic model's $(tokens_of "$tmp/out")"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['plan']['weights']==sys.argv[2], d['plan']" \
    "$tmp/gguf-$w.json" "$fmt" || bad "$w file does not run as $fmt by default"
done
expect_rc 0 "$LATHE" weights init tiny-moe --seed 3 --weights q8_0 -o "$tmp/moe.gguf"
expect_rc 0 "$LATHE" run "$tmp/moe.gguf" --tokens 5,6,7 --gen 4 --threads 2
expect_rc 0 "$LATHE" run "$tmp/moe.gguf" --tokens 5,6,7 --gen 4 --threads 2 --weights int4:g32

# Text in, text out.
expect_rc 0 "$LATHE" run "$tmp/tiny-f32.gguf" --prompt "hello world" --gen 4 --threads 2
grep -q 'text: " hello world"' "$tmp/out" || bad "--prompt output lacks the text: $(cat "$tmp/out")"
expect_rc 2 "$LATHE" run tiny --prompt "hello" --gen 2

# Other commands take a .gguf wherever they take a model.
expect_rc 0 "$LATHE" check "$tmp/tiny-q4_0.gguf"
grep -q "model tiny" "$tmp/out" || bad "check gguf: $(cat "$tmp/out")"
expect_rc 0 "$LATHE" simulate "$tmp/tiny-q4_0.gguf" cpu-host --batch 1 --prompt 16 --gen 8
expect_rc 0 "$LATHE" compile "$tmp/tiny-q8_0.gguf" cpu-host -o "$tmp/plan"
grep -q '"int8:g32"' "$tmp/plan/plan.json" || bad "compile of a q8_0 file is not int8:g32"
expect_rc 0 "$LATHE" weights info "$tmp/tiny-q4_0.gguf"
grep -q "Q4_0" "$tmp/out" || bad "weights info lacks Q4_0"
expect_rc 0 "$LATHE" weights info "$tmp/tiny-f32.gguf" --format json
python3 - "$tmp/out" <<'PY' || bad "weights info json lacks the model or vocabulary fields"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["layers"] == 2 and d["hidden"] == 128 and d["metadata_keys"] > 10, d
assert d["vocabulary"]["tokens"] == 512 and d["vocabulary"]["bos"] == 1, d
PY
# A GGUF file is known by its magic too, whatever its name.
cp "$tmp/tiny-q4_0.gguf" "$tmp/tiny-q4_0.bin"
expect_rc 0 "$LATHE" weights info "$tmp/tiny-q4_0.bin"
expect_rc 0 "$LATHE" check "$tmp/tiny-q4_0.bin"
grep -q "model tiny" "$tmp/out" || bad "check of a GGUF without .gguf: $(cat "$tmp/out")"
# The output of weights init may not replace its input.
expect_rc 2 "$LATHE" weights init "$tmp/tiny-q4_0.bin" -o "$tmp/tiny-q4_0.bin"
grep -q "that is an input of this command" "$tmp/err" || bad "weights init over its input: $(cat "$tmp/err")"
cmp -s "$tmp/tiny-q4_0.bin" "$tmp/tiny-q4_0.gguf" || bad "weights init replaced its input"
# A named pipe nobody writes to is an error, not a hang.
mkfifo "$tmp/pipe.gguf" "$tmp/pipe.toml"
expect_rc 2 timeout 20 "$LATHE" check "$tmp/pipe.gguf"
expect_rc 2 timeout 20 "$LATHE" check "$tmp/pipe.toml"

# Bad files: exit 2, the file named, no crash.
printf 'GGUF\x03\x00\x00\x00garbage' >"$tmp/bad.gguf"
expect_rc 2 "$LATHE" run "$tmp/bad.gguf" --tokens 1 --gen 1
grep -q "bad.gguf" "$tmp/err" || bad "error does not name the file: $(cat "$tmp/err")"
printf 'NOPE' >"$tmp/magic.gguf"
expect_rc 2 "$LATHE" check "$tmp/magic.gguf"
head -c 5000 "$tmp/tiny-f32.gguf" >"$tmp/cut.gguf"
expect_rc 2 "$LATHE" run "$tmp/cut.gguf" --tokens 1 --gen 1
grep -q "cut.gguf" "$tmp/err" || bad "truncated: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" simulate "$tmp/missing.gguf" cpu-host
expect_rc 2 "$LATHE" weights init tiny --weights int4:g128 -o "$tmp/x.gguf"
expect_rc 2 "$LATHE" weights init tiny -o "$tmp/no/such/dir/x.gguf"
[ ! -e "$tmp/x.gguf" ] || bad "a failed init left a file"
ls "$tmp" | grep -q '\.tmp\.' && bad "a temporary file was left behind"
# A block count past kMaxLayers is refused at once (2^32 - 1 built layer tables until
# the machine ran out of memory). The key's u32 value is patched in place.
python3 - "$tmp/tiny-f32.gguf" "$tmp/deep.gguf" <<'PY' || bad "could not patch block_count"
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
k = b"llama.block_count"
i = b.index(k) + len(k)
assert struct.unpack_from("<I", b, i)[0] == 4  # GGUF type u32
struct.pack_into("<I", b, i + 4, 0xFFFFFFFF)
open(sys.argv[2], "wb").write(b)
PY
expect_rc 2 timeout 60 "$LATHE" check "$tmp/deep.gguf"
grep -q "key 'llama.block_count': 4294967295 layers, more than lathe plans (10000)" "$tmp/err" || bad "deep GGUF: $(cat "$tmp/err")"

# A Hugging Face checkpoint converted to GGUF gives the same logits as the checkpoint
# itself, bit for bit: the GGUF writer and reader carry every weight of the Hugging Face
# source (names, tied embeddings, experts) unchanged. The Q/K row order is not tested
# here (both sides get it from the same source); hf_checkpoints checks it against
# transformers, GgufParity against llama.cpp.
HF="$(dirname "$0")/../fixtures/hf"
for m in tiny-llama tiny-mixtral; do
  expect_rc 0 "$LATHE" weights convert "$HF/$m" -o "$tmp/$m.gguf"
  expect_rc 0 "$LATHE" run "$HF/$m" --weights f32 --tokens 5,17,200,3,9 --gen 6 --threads 2 --logits "$tmp/$m-hf.bin"
  expect_rc 0 "$LATHE" run "$tmp/$m.gguf" --weights f32 --tokens 5,17,200,3,9 --gen 6 --threads 2 --logits "$tmp/$m-gguf.bin"
  [ -s "$tmp/$m-hf.bin" ] && cmp -s "$tmp/$m-hf.bin" "$tmp/$m-gguf.bin" ||
    bad "$m: logits of the converted GGUF differ from the Hugging Face checkpoint's"
  # These vocabularies (256 tokens) are too small for the synthetic one: the file says
  # so with llama.cpp's "no_vocab" marker (llama.cpp then loads it; bench/convert_parity.py),
  # `weights info` shows it, and --prompt text is refused with the reason.
  "$LATHE" weights info "$tmp/$m.gguf" | grep -q "tokenizer    none (no_vocab)" ||
    bad "$m: weights info does not show the no_vocab marker"
  expect_rc 2 "$LATHE" run "$tmp/$m.gguf" --weights f32 --prompt "hello" --gen 1
done
expect_rc 2 "$LATHE" weights convert "$tmp" -o "$tmp/y.gguf"
[ ! -e "$tmp/y.gguf" ] || bad "a failed convert left a file"

# A u64 count past int64's range is named as out of range (its conversion was undefined
# and printed "got -9223372036854775808").
python3 - "$tmp/u64.gguf" <<'PY'
import struct, sys
def key(k): return struct.pack("<Q", len(k)) + k
kv = key(b"general.architecture") + struct.pack("<IQ", 8, 5) + b"llama"
kv += key(b"llama.embedding_length") + struct.pack("<II", 4, 64)
kv += key(b"llama.block_count") + struct.pack("<IQ", 10, 2**64 - 1)
open(sys.argv[1], "wb").write(b"GGUF" + struct.pack("<IQQ", 3, 0, 3) + kv)
PY
expect_rc 2 "$LATHE" weights info "$tmp/u64.gguf"
grep -q "key 'llama.block_count': 18446744073709551616 is out of range" "$tmp/err" || bad "u64 block_count: $(cat "$tmp/err")"

# One-field corruptions that ran to wrong tokens with exit 0 (a fuzz run): the tensor
# count one short (a tensor dropped, the data read 64 bytes early), a block count below
# the tensors', an epsilon of 1e38 (config.json's range is [1e-12, 0.1]).
expect_rc 0 "$LATHE" weights init tiny --seed 7 --weights f32 -o "$tmp/f32.gguf"
python3 - "$tmp/f32.gguf" "$tmp" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
def patched(name, fn):
    d = bytearray(data)
    fn(d)
    open(sys.argv[2] + "/" + name, "wb").write(d)
def count(d):
    n = struct.unpack_from("<Q", d, 8)[0]
    struct.pack_into("<Q", d, 8, n - 1)
def value_after(key, fmt, v):
    def fn(d):
        at = d.find(key) + len(key) + 4  # past the key and its value type
        struct.pack_into(fmt, d, at, v)
    return fn
patched("count.gguf", count)
patched("blocks.gguf", value_after(b"llama.block_count", "<I", 1))
patched("eps.gguf", value_after(b"llama.attention.layer_norm_rms_epsilon", "<f", 1e38))
PY
expect_rc 2 "$LATHE" run "$tmp/count.gguf" --tokens 1,2,3 --gen 2
grep -q "bytes after the last tensor's data" "$tmp/err" || bad "a tensor count one short: $(cat "$tmp/err")"
expect_rc 2 "$LATHE" run "$tmp/blocks.gguf" --tokens 1,2,3 --gen 2
grep -q "tensor 'blk.1.attn_norm.weight' and 8 more are not a weight of the model its metadata describes" "$tmp/err" ||
  bad "block_count below the tensors': $(cat "$tmp/err")"
# check and weights info read the same model: they said OK for it.
expect_rc 2 "$LATHE" check "$tmp/blocks.gguf"
grep -q "not a weight of the model its metadata describes (1 layer; llama.block_count" "$tmp/err" || bad "check of a block_count below the tensors': $(cat "$tmp/err")"
expect_rc 2 "$LATHE" check "$tmp/eps.gguf"
grep -q "key 'llama.attention.layer_norm_rms_epsilon' is 1e+38, outside \[1e-12, 0.1\]" "$tmp/err" || bad "eps 1e38: $(cat "$tmp/err")"
# An empty output path, and a shard of the checkpoint as import-hf's output.
expect_rc 2 "$LATHE" weights convert "$HF/tiny-llama" -o ""
grep -q -- "-o: an empty path" "$tmp/err" || bad "convert -o '': $(cat "$tmp/err")"
cp -r "$HF/tiny-llama" "$tmp/hfcopy"
expect_rc 2 "$LATHE" import-hf "$tmp/hfcopy" -o "$tmp/hfcopy/model-00002-of-00002.safetensors"
grep -q "that is an input of this command" "$tmp/err" || bad "import-hf over a shard: $(cat "$tmp/err")"
cmp -s "$HF/tiny-llama/model-00002-of-00002.safetensors" "$tmp/hfcopy/model-00002-of-00002.safetensors" ||
  bad "import-hf replaced a shard"

# check reads the vocabulary as run and weights info do (a BOS id past it was "OK").
python3 - "$tmp/f32.gguf" "$tmp/bos.gguf" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
key = b"tokenizer.ggml.bos_token_id"
struct.pack_into("<I", d, d.find(key) + len(key) + 4, 100000)
open(sys.argv[2], "wb").write(d)
PY
expect_rc 2 "$LATHE" check "$tmp/bos.gguf"
grep -q "token id 100000 is outside the vocabulary (512)" "$tmp/err" || bad "check of a BOS id past the vocabulary: $(cat "$tmp/err")"
# An MoE file with expert_feed_forward_length alone (its feed_forward_length renamed to
# a key lathe does not read) loads: the fallback key was required.
python3 - "$tmp/moe.gguf" "$tmp/moe-noffl.gguf" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
old = b"\x19\x00\x00\x00\x00\x00\x00\x00llama.feed_forward_length"
assert d.count(old) == 1
open(sys.argv[2], "wb").write(d.replace(old, old[:-1] + b"X"))
PY
expect_rc 0 "$LATHE" weights info "$tmp/moe-noffl.gguf"
expect_rc 0 "$LATHE" check "$tmp/moe-noffl.gguf"
# weights init writes to /dev/null and pipes in place (it read its output back, exit 2).
expect_rc 0 "$LATHE" weights init tiny -o /dev/null
grep -q "21 tensors, 2.10 MB" "$tmp/out" || bad "weights init -o /dev/null: $(cat "$tmp/out")"
"$LATHE" weights init tiny --seed 7 --weights f32 -o /dev/stdout 2>"$tmp/err" | head -c 100000000 >"$tmp/piped.gguf"
cmp -s "$tmp/piped.gguf" "$tmp/f32.gguf" || bad "weights init to a pipe differs from the file"

[ $fail -eq 0 ] && echo "gguf cli: all passed"
exit $fail
