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
   Then decode steps of several sequences: bf16 at batch 8, int4:g128 at 4 and 8
   (ms/step and tokens/s against the prediction).
4. Prefill of 2048 tokens: ms; prefill FLOPs / time as a fraction of the cuBLAS peak.
   Goal: >= 70%.
5. Predicted (against the probed spec) vs measured per phase, and the five kernels
   whose measured/predicted ratio is furthest from 1 among those taking >= 1% of
   their phase (from a --per-op run, which launches eagerly with events).
6. Calibration: six more --per-op runs (batch 1/4/8, prompts 256-1024, bf16/int8/int4;
   in runs.json) and `lathe calibrate --holdout 3` on them with the --per-op run of
   step 5: the per-phase error of the probed spec and of the calibrated one, on fitted
   and on held-out runs. (Rebuild the calibrated spec from runs.json if wanted.)
7. Kernel tuning: `lathe tune --backend cuda` at batch 1 (--tune-formats, default bf16
   and int4:g128 weights; 25-37 s each on an H200; 128-token prompt): per tunable kernel
   the default and best time per call and the winning parameters, and the decode step of
   the default vs the tuned plan.
Writes DIR/gpu-check.md (and DIR/runs.json) after every call, so a run stopped at a time
limit keeps its finished sections, and prints it at the end. Every lathe call is logged
to DIR/runs.log (command, exit code, seconds, stderr) and its JSON kept in
DIR/runs.json; a call that
fails leaves a FAILED row with its error and the rest of the table still runs.

--backend cpu --hw cpu-host --model tiny runs the same steps on the CPU backend (a
smoke test of this script on a machine without a GPU; ceilings from --ceilings).
"""
import argparse
import csv
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile
import time

RUNS = {}
FAILED = []
LINES = []


def save(out):
    """Writes what is known so far (gpu-check.md, runs.json) into `out`, so that a run
    stopped at its time limit still leaves its finished sections behind."""
    text = "\n".join(LINES) + "\n"
    if FAILED:
        text += "\nFailed calls (full stderr in runs.log):\n\n" + "".join(
            f"- {key} (exit {rc}): {why}\n" for key, rc, why in FAILED)
    open(os.path.join(out, "gpu-check.md"), "w").write(text)
    json.dump(RUNS, open(os.path.join(out, "runs.json"), "w"), indent=1)
    return text


def call(out, key, *cmd, timeout=600):
    """Runs a lathe command that prints JSON; None (and a FAILED entry) when it fails."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, stdout, stderr = 124, "", f"timed out after {timeout} s\n{e.stderr or ''}"
    dt = time.time() - t0
    with open(os.path.join(out, "runs.log"), "a") as f:
        f.write(f"$ {' '.join(cmd)}\n# {key}: exit {rc}, {dt:.1f} s\n{stderr}\n")
    if rc == 0:
        try:
            RUNS[key] = json.loads(stdout)
            print(f"  {key}: {dt:.1f} s", flush=True)
            save(out)
            return RUNS[key]
        except json.JSONDecodeError as e:
            stderr = f"output is not JSON ({e})"
    why = (stderr.strip().splitlines() or ["(no message)"])[-1][:300]
    FAILED.append((key, rc, why))
    print(f"  {key}: FAILED (exit {rc}): {why}", flush=True)
    save(out)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lathe", default="build/cli/lathe")
    ap.add_argument("--model", default="llama-3-8b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--report", default="")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--hw", default="", help="with --backend cpu: the hardware spec (no probe)")
    ap.add_argument("--ceilings", default="", help="with --backend cpu: COPY_GBS,GEMM_TFLOPS")
    ap.add_argument("--prefill-tokens", type=int, default=2048)
    ap.add_argument("--tune-formats", default="bf16,int4:g128",
                    help="weight formats step 7 tunes (comma separated; empty: skip kernel tuning)")
    ap.add_argument("--tune-timeout", type=int, default=600, help="seconds each `lathe tune` may take")
    a = ap.parse_args()
    L, out = a.lathe, a.out
    os.makedirs(out, exist_ok=True)
    w = LINES.append
    act = ["--act", "bf16"] if a.backend == "cuda" else []
    if a.backend == "cuda":
        hw = os.path.join(out, "probe.toml")
        probe = call(out, "probe", L, "probe", "--backend", "cuda", "--format", "json", "-o", hw)
        if probe is None:
            sys.exit(f"gpu_check: the probe failed: {FAILED[-1][2]}")
        device, copy_gbs, gemm_tflops = probe["device"], probe["copy_gbs"], probe["gemm_tflops_bf16"]
    else:
        hw = a.hw
        device = f"{a.hw} (CPU backend smoke test)"
        copy_gbs, gemm_tflops = (float(x) for x in a.ceilings.split(","))
        probe = None
    copy_bw, gemm_peak = copy_gbs * 1e9, gemm_tflops * 1e12
    print(f"{device}: copy {copy_gbs:.0f} GB/s, GEMM {gemm_tflops:.1f} TFLOP/s", flush=True)

    w(f"## CUDA backend on {device} (measured {datetime.date.today().isoformat()}, scripts/gpu-check.sh)\n")
    if probe:
        w("| ceiling | measured | datasheet |\n|---|---:|---:|")
        w(f"| device copy bandwidth (read + write) | {probe['copy_gbs']:.0f} GB/s | "
          f"{probe['datasheet_bandwidth_gbs']:.0f} GB/s |")
        w(f"| cuBLAS bf16 GEMM {probe['gemm_n']}^3 | {probe['gemm_tflops_bf16']:.0f} TFLOP/s | "
          f"{probe['datasheet_bf16_tflops']:.0f} TFLOP/s |\n")

    if a.report and os.path.exists(a.report):
        groups = {}
        for r in csv.reader(open(a.report)):
            if len(r) != 12:
                continue
            model, fusion, batch, layout, act_, wf, kv, exact, err, tol, mism, unexpl = r
            k = (model, act_, wf, kv)
            g = groups.setdefault(k, {"n": 0, "worst": 0.0, "tol": float(tol), "fail": 0, "exact": exact == "1",
                                      "mism": 0, "unexpl": 0})
            g["n"] += 1
            g["worst"] = max(g["worst"], float(err))
            g["fail"] += float(err) >= float(tol) or (exact == "1" and int(unexpl) > 0)
            g["mism"] += int(mism)
            g["unexpl"] += int(unexpl)
        w("| correctness: model | act | weights | KV | configs | worst normalized error | tolerance | "
          "greedy tokens (of the reference's) | result |\n|---|---|---|---|---:|---:|---:|---|---|")
        for (model, act_, wf, kv), g in sorted(groups.items()):
            if g["mism"] == 0:
                tok = "equal"
            elif g["exact"]:
                tok = f"{g['mism']} differ, near ties" if g["unexpl"] == 0 else f"{g['unexpl']} differ beyond ties"
            else:
                tok = f"{g['mism']} differ (allowed)"
            w(f"| {model} | {act_} | {wf} | {kv} | {g['n']} | {g['worst']:.2e} | {g['tol']:.2e} | {tok} | "
              f"{'FAIL' if g['fail'] else 'ok'} |")
        w("")

    # Decode at batch 1, CUDA graphs, per weight format.
    w("| phase | weights | measured | predicted | measured/predicted | achieved | of ceiling | goal |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|")
    for fmt, goal in (("bf16", 0.85), ("int8", None), ("int4:g128", 0.70)):
        run = call(out, f"decode-{fmt}", L, "run", a.model, "--backend", a.backend, "--hw", hw, "--weights", fmt,
                   "--prompt-tokens", "128", "--gen", "128", "--format", "json")
        sim = call(out, f"simulate-decode-{fmt}", L, "simulate", a.model, hw, "--prompt", "128", "--gen", "128",
                   "--weights", fmt, *act, "--format", "json")
        if run is None or sim is None:
            w(f"| decode b1 (ms/token) | {fmt} | FAILED: {FAILED[-1][2]} | | | | | |")
            continue
        step_bytes = sim["decode_bytes"] / max(1, sim["decode_steps"])
        tpot = run["tpot_ms"]
        frac = step_bytes / (tpot / 1e3) / copy_bw
        pred = run["predicted"]["tpot_ms"]
        w(f"| decode b1 (ms/token) | {fmt} | {tpot:.3f} | {pred:.3f} | {tpot / pred:.2f} | "
          f"{step_bytes / (tpot / 1e3) / 1e9:.0f} GB/s | {100 * frac:.0f}% | {'' if goal is None else f'>= {goal:.0%}'} |")
        print(f"decode {fmt}: {tpot:.3f} ms/token, {100 * frac:.0f}% of copy bandwidth", flush=True)

    # Batched decode: a step of several sequences (bf16 at 8: matmuls on cuBLAS; int4 at
    # 4 on the warp-per-row GEMV and at 8 through the dequantized copy), against the
    # same weights at batch 1 above.
    for fmt, b in (("bf16", 8), ("int4:g128", 4), ("int4:g128", 8)):
        run = call(out, f"decode-{fmt}-b{b}", L, "run", a.model, "--backend", a.backend, "--hw", hw, "--weights", fmt,
                   "--batch", str(b), "--prompt-tokens", "128", "--gen", "64", "--format", "json")
        if run is None:
            w(f"| decode b{b} (ms/step) | {fmt} | FAILED: {FAILED[-1][2]} | | | | | |")
            continue
        tpot, pred = run["tpot_ms"], run["predicted"]["tpot_ms"]
        w(f"| decode b{b} (ms/step) | {fmt} | {tpot:.3f} | {pred:.3f} | {tpot / pred:.2f} | "
          f"{b / (tpot / 1e3):.0f} tokens/s | | |")
        print(f"decode {fmt} batch {b}: {tpot:.3f} ms/step", flush=True)

    P = str(a.prefill_tokens)
    pre = call(out, "prefill", L, "run", a.model, "--backend", a.backend, "--hw", hw, "--prompt-tokens", P, "--gen", "1",
               "--format", "json")
    sim = call(out, "simulate-prefill", L, "simulate", a.model, hw, "--prompt", P, "--gen", "1", *act,
               "--format", "json")
    if pre is None or sim is None:
        w(f"| prefill {P} (ms) | bf16 | FAILED: {FAILED[-1][2]} | | | | | |\n")
    else:
        pms = pre["prefill_ms"]
        tflops = sim["prefill_flops"] / (pms / 1e3)
        ppred = pre["predicted"]["prefill_ms"]
        w(f"| prefill {P} (ms) | bf16 | {pms:.2f} | {ppred:.2f} | {pms / ppred:.2f} | {tflops / 1e12:.0f} TFLOP/s | "
          f"{100 * tflops / gemm_peak:.0f}% | >= 70% |\n")
        print(f"prefill {P}: {pms:.2f} ms, {100 * tflops / gemm_peak:.0f}% of GEMM peak", flush=True)

    # Worst kernels, from an eager --per-op run.
    per = call(out, "per-op", L, "run", a.model, "--backend", a.backend, "--hw", hw, "--prompt-tokens", P, "--gen",
               "16", "--per-op", "--format", "json")
    if per is None:
        w(f"| worst kernels: FAILED: {FAILED[-1][2]} |\n|---|")
    else:
        totals = {}
        for k in per["kernels"]:
            totals[k["phase"]] = totals.get(k["phase"], 0) + k["measured_ms"]
        cands = [k for k in per["kernels"] if k["predicted_ms"] > 0 and k["measured_ms"] > 0 and
                 k["measured_ms"] >= 0.01 * totals[k["phase"]]]
        cands.sort(key=lambda k: -abs(math.log(k["measured_ms"] / k["predicted_ms"])))
        w("| worst kernels (bf16, eager) | phase | kernel | measured ms | predicted ms | measured/predicted |\n"
          "|---|---|---|---:|---:|---:|")
        for k in cands[:5]:
            w(f"| {k['name']} | {k['phase']} | {k['kernel']} | {k['measured_ms']:.4f} | {k['predicted_ms']:.4f} | "
              f"{k['measured_ms'] / k['predicted_ms']:.2f} |")
    # Calibration: a few more eager --per-op runs (batch, prompt, weight format; kept in
    # runs.json like every call) and `lathe calibrate` fitting the probed spec on two
    # thirds of them with the error on the held-out third.
    cal_dir = tempfile.mkdtemp(prefix="lathe-calibration-")
    cal_path = os.path.join(cal_dir, "runs.jsonl")
    cal_runs = [per] if per is not None else []
    for b, p, g, fmt in ((1, 512, 32, "bf16"), (8, 512, 32, "bf16"), (4, 1024, 16, "bf16"), (1, 512, 32, "int8"),
                         (1, 512, 32, "int4:g128"), (8, 256, 32, "int4:g128")):
        P2 = str(min(p, a.prefill_tokens))
        r = call(out, f"calibration-b{b}-p{P2}-{fmt}", L, "run", a.model, "--backend", a.backend, "--hw", hw,
                 "--batch", str(b), "--prompt-tokens", P2, "--gen", str(g), "--weights", fmt, "--per-op",
                 "--format", "json")
        if r is not None:
            cal_runs.append(r)
    with open(cal_path, "w") as f:
        for r in cal_runs:
            f.write(json.dumps(r) + "\n")
    cal = call(out, "calibrate", L, "calibrate", cal_path, "--hw", hw, "--holdout", "3", "-o",
               os.path.join(cal_dir, "calibrated.toml"), "--format", "json") if len(cal_runs) >= 3 else None
    if cal is not None:
        e = cal["error"]
        w(f"\n| calibration ({cal['train_runs']} runs fitted, {cal['test_runs']} held out) | mean per-phase error "
          f"before | after |\n|---|---:|---:|")
        w(f"| fitted runs | {100 * e['train_before']:.1f}% | {100 * e['train_after']:.1f}% |")
        w(f"| held-out runs | {100 * e['test_before']:.1f}% | {100 * e['test_after']:.1f}% |")
    # Kernel tuning (the tuning files stay in a temp dir; their JSON is in runs.json).
    tune_dir = tempfile.mkdtemp(prefix="lathe-tuning-")
    for fmt in [f for f in a.tune_formats.split(",") if f]:
        t = call(out, f"tune-{fmt}", L, "tune", a.model, hw, "--backend", a.backend, "--weights", fmt,
                 "--prompt-tokens", "128", "--gen", "32", "--reps", "2", "--steps", "8", *act,
                 "-o", os.path.join(tune_dir, f"tuning-{fmt.replace(':', '-')}.json"), "--format", "json",
                 timeout=a.tune_timeout)
        if t is None:
            w(f"\n| kernel tuning {fmt}: FAILED: {FAILED[-1][2]} |\n|---|")
            continue
        w(f"\n| kernel tuning ({fmt}, batch 1) | shape | default us | best us | best | gain |\n"
          "|---|---|---:|---:|---|---:|")
        for e in t["all"]:
            best = " ".join(f"{k[5:]}={v}" for k, v in sorted(e["params"].items())) or "default"
            gain = e["default_us"] / e["best_us"] if e["best_us"] > 0 else 0
            w(f"| {e['kind']} | {e['shape']} | {e['default_us']:.1f} | {e['best_us']:.1f} | {best} | {gain:.2f}x |")
        if t.get("plan"):
            pl = t["plan"]
            w(f"| whole plan | decode step | {pl['decode_default_ms'] * 1e3:.1f} | {pl['decode_tuned_ms'] * 1e3:.1f} | "
              f"| {pl['decode_gain']:.2f}x |")
            w(f"| whole plan | prefill 128 | {pl['prefill_default_ms'] * 1e3:.1f} | {pl['prefill_tuned_ms'] * 1e3:.1f} | "
              f"| {pl['prefill_gain']:.2f}x |")
    print(save(out))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
