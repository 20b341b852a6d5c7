#!/usr/bin/env python3
"""Decode (or prefill) speed of two lathe binaries side by side (A/B of a CPU kernel change).

Usage: bench/decode_ab.py --old /tmp/lathe-before --new build/cli/lathe
                          [--model small] [--formats f32,f16,bf16] [--batches 1,4,8]
                          [--phase decode|prefill] [--prompt 64] [--rounds 3] [-o table.md]

For each weight format and batch, the two binaries run `lathe run MODEL --batch B
--weights W --repeat 3 --format json` one after the other, `--rounds` times, and each
binary's fastest TPOT is kept (every run reports the fastest of its three passes; the
kernels come from the JIT cache after the first run). Interleaving the binaries keeps a
shared host's drifting bandwidth from favouring one of them. The old binary must be a
copy of the `lathe` executable built from the earlier commit: the kernel library is
compiled into it, and the JIT it loads is the same for both.
Prints a Markdown table (and writes it to -o): TPOT of each, and before / after
(above 1: the new binary is faster). With --phase prefill the runs take --prompt tokens
per sequence and generate 2, and the table compares the prefill time (all sequences).
"""
import argparse
import json
import subprocess
import sys


def measure(lathe, model, fmt, batch, phase, prompt):
    cmd = [lathe, "run", model, "--batch", str(batch), "--weights", fmt, "--repeat", "3", "--format", "json"]
    if phase == "prefill":
        cmd += ["--prompt-tokens", str(prompt), "--gen", "2"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return float(json.loads(p.stdout)["prefill_ms" if phase == "prefill" else "tpot_ms"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="lathe binary before the change")
    ap.add_argument("--new", default="build/cli/lathe", help="lathe binary after the change")
    ap.add_argument("--model", default="small")
    ap.add_argument("--formats", default="f32,f16,bf16")
    ap.add_argument("--batches", default="1,4,8")
    ap.add_argument("--phase", choices=["decode", "prefill"], default="decode")
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens per sequence with --phase prefill")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("--rounds must be at least 1")
    if a.prompt < 1:
        sys.exit("--prompt must be at least 1")
    what = "prefill ms" if a.phase == "prefill" else "TPOT ms"
    formats = [f for f in a.formats.split(",") if f]
    batches = [int(b) for b in a.batches.split(",") if b]
    lines = [
        f"| weights | batch | before: {what} | after: {what} | before / after |",
        "|---|---:|---:|---:|---:|",
    ]
    for fmt in formats:
        for b in batches:
            old, new = float("inf"), float("inf")
            for r in range(a.rounds):
                print(f"decode_ab: {a.phase} {fmt} batch {b} round {r + 1}/{a.rounds}", file=sys.stderr)
                old = min(old, measure(a.old, a.model, fmt, b, a.phase, a.prompt))
                new = min(new, measure(a.new, a.model, fmt, b, a.phase, a.prompt))
            lines.append(f"| {fmt} | {b} | {old:.2f} | {new:.2f} | {old / new:.2f} |")
    table = "\n".join(lines) + "\n"
    print(table, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
