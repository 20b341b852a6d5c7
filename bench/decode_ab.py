#!/usr/bin/env python3
"""Decode (or prefill) speed of two lathe binaries side by side (A/B of a CPU kernel change).

Usage: bench/decode_ab.py --old /tmp/lathe-before --new build/cli/lathe
                          [--model small] [--formats f32,f16,bf16] [--batches 1,4,8]
                          [--phase decode|prefill] [--prompt 64] [--gen N] [--kv int8]
                          [--kernel decode_attention] [--hw probe.toml] [--rounds 3] [-o table.md]

For each weight format and batch, the two binaries run `lathe run MODEL --batch B
--weights W --repeat 3 --format json` one after the other, `--rounds` times, and each
binary's fastest TPOT is kept (every run reports the fastest of its three passes; the
kernels come from the JIT cache after the first run). Interleaving the binaries keeps a
shared host's drifting bandwidth from favouring one of them. The old binary must be a
copy of the `lathe` executable built from the earlier commit: the kernel library is
compiled into it, and it loads the JIT module of the build tree it was copied from
(when the module's interface changed between the commits, a copy refuses the new one:
build the earlier commit in a tree of its own, `git worktree add`, and pass its binary).
Prints a Markdown table (and writes it to -o): TPOT of each, and before / after
(above 1: the new binary is faster). With --phase prefill the runs take --prompt tokens
per sequence (default 64) and generate 2, and the table compares the prefill time (all
sequences); with --phase decode, --prompt and --gen set the context the steps run over.
--kv sets the KV-cache dtype, --hw the target predictions are for. --kernel K compares one kernel instead (`--per-op`: the
microseconds a call of the kernels labelled K in the phase, summed over their nodes and
calls, fastest run kept), beside the new binary's prediction for it.
"""
import argparse
import json
import subprocess
import sys


def measure(lathe, model, fmt, batch, a):
    """The phase's time in ms, or with --kernel (us a call measured, us a call predicted)."""
    cmd = [lathe, "run", model, "--batch", str(batch), "--weights", fmt, "--repeat", "3", "--format", "json"]
    if a.phase == "prefill":
        cmd += ["--prompt-tokens", str(a.prompt or 64), "--gen", "2"]
    else:
        if a.prompt:
            cmd += ["--prompt-tokens", str(a.prompt)]
        if a.gen:
            cmd += ["--gen", str(a.gen)]
    if a.kv:
        cmd += ["--kv", a.kv]
    if a.hw:
        cmd += ["--hw", a.hw]
    if a.kernel:
        cmd += ["--per-op"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    j = json.loads(p.stdout)
    if not a.kernel:
        return float(j["prefill_ms" if a.phase == "prefill" else "tpot_ms"])
    rows = [k for k in j["kernels"] if k["kernel"] == a.kernel and k["phase"] == a.phase]
    calls = sum(k["calls"] for k in rows)
    if not calls:
        sys.exit(f"no {a.phase} kernel labelled {a.kernel} ran: {' '.join(cmd)}")
    return (1000 * sum(k["measured_ms"] for k in rows) / calls, 1000 * sum(k["predicted_ms"] for k in rows) / calls)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="lathe binary before the change")
    ap.add_argument("--new", default="build/cli/lathe", help="lathe binary after the change")
    ap.add_argument("--model", default="small")
    ap.add_argument("--formats", default="f32,f16,bf16")
    ap.add_argument("--batches", default="1,4,8")
    ap.add_argument("--phase", choices=["decode", "prefill"], default="decode")
    ap.add_argument("--prompt", type=int, help="prompt tokens per sequence (prefill default 64; decode: lathe's)")
    ap.add_argument("--gen", type=int, help="tokens generated with --phase decode (default: lathe's)")
    ap.add_argument("--kv", help="KV-cache dtype (default: lathe's)")
    ap.add_argument("--hw", help="prediction target, e.g. a `lathe probe -o` spec (default: lathe's)")
    ap.add_argument("--kernel", help="compare one kernel label's time a call (e.g. decode_attention)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("--rounds must be at least 1")
    if a.prompt is not None and a.prompt < 1:
        sys.exit("--prompt must be at least 1")
    if a.gen is not None and a.gen < 1:
        sys.exit("--gen must be at least 1")
    what = "prefill ms" if a.phase == "prefill" else "TPOT ms"
    if a.kernel:
        what = f"{a.kernel} us a call"
    formats = [f for f in a.formats.split(",") if f]
    batches = [int(b) for b in a.batches.split(",") if b]
    head = f"| weights | batch | before: {what} | after: {what} | before / after |"
    rule = "|---|---:|---:|---:|---:|"
    if a.kernel:
        head, rule = head + " predicted (after) |", rule + "---:|"
    lines = [head, rule]
    for fmt in formats:
        for b in batches:
            old, new, pred = float("inf"), float("inf"), 0.0
            for r in range(a.rounds):
                print(f"decode_ab: {a.phase} {fmt} batch {b} round {r + 1}/{a.rounds}", file=sys.stderr)
                o, n = measure(a.old, a.model, fmt, b, a), measure(a.new, a.model, fmt, b, a)
                if a.kernel:
                    (o, _), (n, pred) = o, n
                old, new = min(old, o), min(new, n)
            row = f"| {fmt} | {b} | {old:.2f} | {new:.2f} | {old / new:.2f} |"
            lines.append(row + (f" {pred:.2f} |" if a.kernel else ""))
    table = "\n".join(lines) + "\n"
    print(table, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
