#!/usr/bin/env python3
"""llama.cpp on GGUF files written by `lathe weights convert`, against transformers.

The Hugging Face fixtures of bench/hf_parity.py (tests/fixtures/hf/: tiny Llama in
f32, sharded; tiny Mixtral in bf16) carry the logits transformers computed for a fixed
prompt and three decode tokens. This script converts each checkpoint to GGUF with
`lathe weights convert` (f32 matrices), loads the file in llama.cpp
(llama-cpp-python), evaluates the same token path with logits for every position, and
reports the normalized error ||llama.cpp - transformers|| / ||transformers|| at the
last prompt position and after each decode token. It checks the converter against two
peers that share no code with lathe: the file must be a valid llama GGUF (llama.cpp
loads and runs it) with the right tensors, Q/K row order and metadata (transformers'
numbers come out).

Needs: pip install llama-cpp-python numpy
Usage: bench/convert_parity.py --lathe build/cli/lathe [--tolerance 1e-4]
Exit status 1 when an error exceeds the tolerance.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lathe", default="build/cli/lathe")
    ap.add_argument("--fixtures", default="tests/fixtures/hf")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    a = ap.parse_args()
    from llama_cpp import Llama

    worst_all = 0.0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir(a.fixtures)):
            d = os.path.join(a.fixtures, name)
            ref_path = os.path.join(d, "reference_logits.json")
            if not os.path.exists(ref_path):
                continue
            ref = json.load(open(ref_path))
            gguf = os.path.join(tmp, name + ".gguf")
            subprocess.run([a.lathe, "weights", "convert", d, "--weights", "f32", "-o", gguf], check=True,
                           capture_output=True, text=True)
            tokens = list(ref["prompt"]) + list(ref["decode"])
            # F32 KV cache: llama.cpp's default F16 cache alone costs ~1e-3 relative error.
            llm = Llama(model_path=gguf, n_ctx=64, logits_all=True, verbose=False, n_threads=2, type_k=0, type_v=0)
            llm.reset()
            llm.eval(tokens)
            scores = np.array(llm.scores[: len(tokens)], dtype=np.float64)
            # reference logits: the last prompt position, then after each decode token.
            positions = [len(ref["prompt"]) - 1 + i for i in range(len(ref["logits"]))]
            errs = []
            for pos, want in zip(positions, ref["logits"]):
                want = np.array(want, dtype=np.float64)
                got = scores[pos][: len(want)]
                errs.append(float(np.linalg.norm(got - want) / np.linalg.norm(want)))
            worst = max(errs)
            worst_all = max(worst_all, worst)
            rows.append((name, os.path.getsize(gguf), errs))
            del llm
    print(f"| fixture | GGUF bytes | normalized error per position (llama.cpp vs transformers) | result |")
    print("|---|---:|---|---|")
    for name, size, errs in rows:
        ok = max(errs) <= a.tolerance
        print(f"| {name} | {size} | {', '.join(f'{e:.2e}' for e in errs)} | {'ok' if ok else 'FAIL'} |")
    print(f"\ntolerance {a.tolerance:g}; worst {worst_all:.2e}")
    return 0 if worst_all <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
