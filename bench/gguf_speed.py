#!/usr/bin/env python3
"""Speed of lathe beside llama.cpp (llama-cpp-python) on the same GGUF files.

For each format, `lathe weights init MODEL --weights FMT` writes the file; then, one
after the other on the same threads: `lathe run FILE --prompt-tokens P --gen G
--threads T --format json` (prefill and decode tokens/s as the runtime measures them,
after a warm-up run that fills the JIT cache), and llama.cpp loading the same file with the same thread
count and an F32 KV cache (lathe's CPU plans keep the KV cache in f32): prefill = one
eval() of the P-token prompt (after one warm-up prefill), decode = G single-token
eval() calls; tokens/s from wall time. Each side runs --repeat times, alternating, and
the best run of each is reported (on a shared machine other jobs only ever slow a run).

Needs: pip install llama-cpp-python numpy
Usage: bench/gguf_speed.py --lathe build/cli/lathe [--model bench/models/bench-124m.toml]
       [--formats f32,q8_0,q4_0] [--threads 2] [--prompt 128] [--gen 64]
"""
import argparse
import json
import os
import platform
import subprocess
import tempfile
import time


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lathe", default="build/cli/lathe")
    ap.add_argument("--model", default="bench/models/bench-124m.toml")
    ap.add_argument("--formats", default="f32,q8_0,q4_0")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--dir", default="")
    ap.add_argument("--repeat", type=int, default=5, help="runs per side, alternating; the best is reported")
    a = ap.parse_args()
    from llama_cpp import Llama, __version__ as llama_version

    out = a.dir or tempfile.mkdtemp(prefix="lathe-speed-")
    rows = []
    for fmt in a.formats.split(","):
        path = os.path.join(out, f"model-{fmt}.gguf")
        if not os.path.exists(path):
            subprocess.run([a.lathe, "weights", "init", a.model, "--seed", "1", "--weights", fmt, "-o", path],
                           check=True, capture_output=True)
        cmd = [a.lathe, "run", path, "--prompt-tokens", str(a.prompt), "--gen", str(a.gen + 1), "--threads",
               str(a.threads), "--format", "json"]
        subprocess.run(cmd, check=True, capture_output=True)  # warm-up: fills the JIT cache
        llm = Llama(model_path=path, n_ctx=a.prompt + a.gen + 8, n_batch=a.prompt, n_ubatch=a.prompt,
                    n_threads=a.threads, n_threads_batch=a.threads, type_k=0, type_v=0, verbose=False)
        vocab = llm.n_vocab()
        prompt = [(i * 7919 + 13) % vocab for i in range(a.prompt)]
        llm.reset()
        llm.eval(prompt)  # warm-up
        best = [0.0, 0.0, 0.0, 0.0]  # lathe prefill, llama.cpp prefill, lathe decode, llama.cpp decode
        for _ in range(a.repeat):  # alternate the two; keep each one's best run
            j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            best[0] = max(best[0], j["prefill_tokens_per_s"])
            best[2] = max(best[2], j["decode_tokens_per_s"])
            llm.reset()
            t0 = time.perf_counter()
            llm.eval(prompt)
            best[1] = max(best[1], a.prompt / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            tok = 1
            for _ in range(a.gen):
                llm.eval([tok])
                tok = (tok * 31 + 7) % vocab
            best[3] = max(best[3], a.gen / (time.perf_counter() - t0))
        del llm
        rows.append((fmt, best[0], best[1], best[2], best[3]))

    print(f"model {a.model}, {a.threads} threads, prompt {a.prompt}, decode {a.gen} tokens, best of {a.repeat}; "
          f"llama-cpp-python {llama_version}; {cpu_model()}")
    print("| format | lathe prefill tok/s | llama.cpp prefill tok/s | prefill ratio | lathe decode tok/s | "
          "llama.cpp decode tok/s | decode ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for fmt, lp, cp, ld, cd in rows:
        print(f"| {fmt} | {lp:.1f} | {cp:.1f} | {lp / cp:.2f} | {ld:.1f} | {cd:.1f} | {ld / cd:.2f} |")


if __name__ == "__main__":
    main()
