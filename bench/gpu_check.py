#!/usr/bin/env python3
"""The CUDA backend on a GPU, in one table (run by scripts/gpu-check.sh).

Usage: bench/gpu_check.py --out DIR [--lathe build/cli/lathe] [--model llama-3-8b]
                          [--report DIR/gpu-tests.csv]

1. Ceilings measured on the device: `lathe probe --backend cuda` (device-to-device
   copy bandwidth, read + write bytes; cuBLAS bf16 GEMM on random data).
2. Correctness: the per-configuration errors the GPU tests wrote (LATHE_GPU_REPORT):
   tiny dense and MoE on CUDA against the float64 reference.
3. Decode at batch 1 (bf16, int8, int4:g128 weights; synthetic values), CUDA graphs:
   ms/token; bytes a step must move (`lathe simulate`) / TPOT as a fraction of the
   copy bandwidth. Goals: >= 85% bf16, >= 70% int4.
4. Prefill of 2048 tokens: ms; prefill FLOPs / time as a fraction of the cuBLAS peak.
   Goal: >= 70%.
5. Predicted (against the probed spec) vs measured per phase, and the five kernels
   whose measured/predicted ratio is furthest from 1 among those taking >= 1% of
   their phase (from a --per-op run, which launches eagerly with events).
Writes DIR/gpu-check.md and prints it.
"""
import argparse
import csv
import datetime
import json
import math
import os
import subprocess
import sys


def sh(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lathe", default="build/cli/lathe")
    ap.add_argument("--model", default="llama-3-8b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--report", default="")
    a = ap.parse_args()
    L, out = a.lathe, a.out
    os.makedirs(out, exist_ok=True)
    probe_toml = os.path.join(out, "probe.toml")
    probe = json.loads(sh(L, "probe", "--backend", "cuda", "--format", "json", "-o", probe_toml))
    copy_bw = probe["copy_gbs"] * 1e9
    gemm_peak = probe["gemm_tflops_bf16"] * 1e12
    print(f"{probe['device']}: copy {probe['copy_gbs']:.0f} GB/s, cuBLAS bf16 {probe['gemm_tflops_bf16']:.0f} TFLOP/s",
          flush=True)

    lines = []
    w = lines.append
    w(f"## CUDA backend on {probe['device']} (measured {datetime.date.today().isoformat()}, scripts/gpu-check.sh)\n")
    w("| ceiling | measured | datasheet |\n|---|---:|---:|")
    w(f"| device copy bandwidth (read + write) | {probe['copy_gbs']:.0f} GB/s | {probe['datasheet_bandwidth_gbs']:.0f} GB/s |")
    w(f"| cuBLAS bf16 GEMM {probe['gemm_n']}^3 | {probe['gemm_tflops_bf16']:.0f} TFLOP/s | "
      f"{probe['datasheet_bf16_tflops']:.0f} TFLOP/s |\n")

    if a.report and os.path.exists(a.report):
        rows = list(csv.reader(open(a.report)))
        groups = {}
        for r in rows:
            model, fusion, batch, layout, act, wf, kv, exact, err, tol, mism = r
            k = (model, act, wf, kv)
            g = groups.setdefault(k, {"n": 0, "worst": 0.0, "tol": float(tol), "fail": 0, "exact": exact == "1",
                                      "mism": 0})
            g["n"] += 1
            g["worst"] = max(g["worst"], float(err))
            g["fail"] += float(err) >= float(tol) or (exact == "1" and int(mism) > 0)
            g["mism"] += int(mism)
        w("| correctness: model | act | weights | KV | configs | worst normalized error | tolerance | "
          "greedy tokens | result |\n|---|---|---|---|---:|---:|---:|---|---|")
        for (model, act, wf, kv), g in sorted(groups.items()):
            tok = "equal" if g["mism"] == 0 else f"{g['mism']} differ" + ("" if g["exact"] else " (allowed)")
            w(f"| {model} | {act} | {wf} | {kv} | {g['n']} | {g['worst']:.2e} | {g['tol']:.2e} | {tok} | "
              f"{'FAIL' if g['fail'] else 'ok'} |")
        w("")

    # Decode at batch 1, CUDA graphs, per weight format.
    w("| phase | weights | measured | predicted | measured/predicted | achieved | of ceiling | goal |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|")
    for fmt, goal in (("bf16", 0.85), ("int8", None), ("int4:g128", 0.70)):
        run = json.loads(sh(L, "run", a.model, "--backend", "cuda", "--hw", probe_toml, "--weights", fmt,
                            "--prompt-tokens", "128", "--gen", "128", "--format", "json"))
        sim = json.loads(sh(L, "simulate", a.model, probe_toml, "--prompt", "128", "--gen", "128", "--weights", fmt,
                            "--act", "bf16", "--format", "json"))
        step_bytes = sim["decode_bytes"] / max(1, sim["decode_steps"])
        tpot = run["tpot_ms"]
        frac = step_bytes / (tpot / 1e3) / copy_bw
        pred = run["predicted"]["tpot_ms"]
        w(f"| decode b1 (ms/token) | {fmt} | {tpot:.3f} | {pred:.3f} | {tpot / pred:.2f} | "
          f"{step_bytes / (tpot / 1e3) / 1e9:.0f} GB/s | {100 * frac:.0f}% | {'' if goal is None else f'>= {goal:.0%}'} |")
        print(f"decode {fmt}: {tpot:.3f} ms/token, {100 * frac:.0f}% of copy bandwidth", flush=True)

    pre = json.loads(sh(L, "run", a.model, "--backend", "cuda", "--hw", probe_toml, "--prompt-tokens", "2048", "--gen",
                        "1", "--format", "json"))
    sim = json.loads(sh(L, "simulate", a.model, probe_toml, "--prompt", "2048", "--gen", "1", "--act", "bf16",
                        "--format", "json"))
    pms = pre["prefill_ms"]
    tflops = sim["prefill_flops"] / (pms / 1e3)
    ppred = pre["predicted"]["prefill_ms"]
    w(f"| prefill 2048 (ms) | bf16 | {pms:.2f} | {ppred:.2f} | {pms / ppred:.2f} | {tflops / 1e12:.0f} TFLOP/s | "
      f"{100 * tflops / gemm_peak:.0f}% | >= 70% |\n")
    print(f"prefill 2048: {pms:.2f} ms, {100 * tflops / gemm_peak:.0f}% of cuBLAS peak", flush=True)

    # Worst kernels, from an eager --per-op run.
    per = json.loads(sh(L, "run", a.model, "--backend", "cuda", "--hw", probe_toml, "--prompt-tokens", "2048", "--gen",
                        "16", "--per-op", "--format", "json"))
    totals = {}
    for k in per["kernels"]:
        totals[k["phase"]] = totals.get(k["phase"], 0) + k["measured_ms"]
    cands = [k for k in per["kernels"] if k["predicted_ms"] > 0 and k["measured_ms"] >= 0.01 * totals[k["phase"]]]
    cands.sort(key=lambda k: -abs(math.log(k["measured_ms"] / k["predicted_ms"])))
    w("| worst kernels (bf16, eager) | phase | kernel | measured ms | predicted ms | measured/predicted |\n"
      "|---|---|---|---:|---:|---:|")
    for k in cands[:5]:
        w(f"| {k['name']} | {k['phase']} | {k['kernel']} | {k['measured_ms']:.4f} | {k['predicted_ms']:.4f} | "
          f"{k['measured_ms'] / k['predicted_ms']:.2f} |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(out, "gpu-check.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
