#!/usr/bin/env python3
"""CPU backend performance on this machine, measured against its own ceilings.

Usage: bench/cpu_bench.py [--lathe build/cli/lathe] [--models small,tinyllama-1.1b]
                          [--formats f32,int8,q8_0,int4:g32] [-o docs/performance-cpu.md]

1. `lathe probe` measures streaming read bandwidth and f32 FMA peak (all threads), three
   times (the median is the run's headline figure).
2. For each model and weight format, `lathe probe` again (unless --no-probe-each: a
   shared host's bandwidth drifts between states within minutes, so each row's
   predictions and fractions use the ceilings measured just before its runs), then
   `lathe run` executes prefill and decode for real (predictions against that target),
   and `lathe simulate` on the same target gives the bytes a decode step must move and
   the FLOPs of prefill.
3. Achieved bandwidth = bytes per decode step / measured TPOT; achieved FLOP/s =
   prefill FLOPs / measured prefill time; both as fractions of the probe's ceilings.
4. JIT compile time of the whole plan: a cold run (empty cache) and a cached run.
Prints a Markdown table and writes it to -o.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile


def sh(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lathe", default="build/cli/lathe")
    ap.add_argument("--models", default="small,tinyllama-1.1b")
    ap.add_argument("--formats", default="f32,int8,q8_0,int4:g32")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("-o", "--out", default="docs/performance-cpu.md")
    ap.add_argument("--no-probe-each", action="store_true",
                    help="use the median of the three first probes for every row")
    a = ap.parse_args()
    L = a.lathe
    work = tempfile.mkdtemp(prefix="lathe-bench-")
    # The machine's ceilings drift between runs on shared hosts: probe three times and
    # use the median probe (by bandwidth); the range is reported beside it.
    probe = os.path.join(work, "probe.toml")
    probes = []
    for i in range(3):
        path = os.path.join(work, f"probe{i}.toml")
        sh(L, "probe", "-o", path)
        probes.append((json.loads(sh(L, "check", path, "--format", "json"))["fields"], path))
    probes.sort(key=lambda p: p[0]["hbm_bandwidth_gbs"])
    os.replace(probes[1][1], probe)
    bw_range = [p[0]["hbm_bandwidth_gbs"] for p in probes]
    fields = json.loads(sh(L, "check", probe, "--format", "json"))["fields"]
    bw = fields["hbm_bandwidth_gbs"] * 1e9
    peak = fields["peak_tflops.fp32"] * 1e12
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True,
                         text=True).stdout.strip()
    threads = os.cpu_count()

    rows = []
    retries = 0
    for model in a.models.split(","):
        for fmt in a.formats.split(","):
            cache = os.path.join(work, "cache-" + model + "-" + fmt.replace(":", "_"))
            row_probe, row_bw, row_peak = probe, bw, peak
            row_probe_path = os.path.join(work, "probe-" + model + "-" + fmt.replace(":", "_") + ".toml")
            cold = None
            stable = True
            for attempt in range(4):
                if not a.no_probe_each:
                    row_probe = row_probe_path
                    sh(L, "probe", "-o", row_probe)
                    f = json.loads(sh(L, "check", row_probe, "--format", "json"))["fields"]
                    row_bw, row_peak = f["hbm_bandwidth_gbs"] * 1e9, f["peak_tflops.fp32"] * 1e12
                common = ["--hw", row_probe, "--prompt-tokens", str(a.prompt), "--gen", str(a.gen), "--weights", fmt,
                          "--format", "json", "--cache-dir", cache]
                if cold is None:
                    cold = json.loads(sh(L, "run", model, *common))
                # Two processes with cached kernels, each the best of three passes
                # (`lathe run --repeat 3`: steady state, without the first pass's one-time
                # costs), and the better of the two (the host is shared; the best run is
                # the one least disturbed).
                # Probes between the two processes and after them: when the host changed
                # state meanwhile (the bandwidth, the f32 FMA peak or the 8-bit dot-product
                # peak of either moved by more than 15% from the probe before), the row is
                # measured again. (With only a probe before and one after, a row ran in
                # the host's slow state between two probes that both caught the fast one.)
                runs, later = [], []
                for i in range(2):
                    runs.append(json.loads(sh(L, "run", model, *common, "--repeat", "3")))
                    if not a.no_probe_each:
                        path = os.path.join(work, f"probe-later{i}.toml")
                        sh(L, "probe", "-o", path)
                        later.append(json.loads(sh(L, "check", path, "--format", "json"))["fields"])
                run = min(runs, key=lambda r: r["decode_ms"] + r["prefill_ms"])
                if a.no_probe_each:
                    break
                moved = [(k, f.get(k, 0), lf.get(k, 0)) for lf in later
                         for k in ("hbm_bandwidth_gbs", "peak_tflops.fp32", "peak_tflops.int8")
                         if f.get(k, 0) > 0 and abs(lf.get(k, 0) / f[k] - 1) > 0.15]
                stable = not moved
                if stable:
                    break
                print(f"{model} {fmt}: " + ", ".join(f"{k} moved from {b:.4g} to {c:.4g}" for k, b, c in moved) +
                      " during the runs; measuring the row again", flush=True)
                retries += 1
            sim = json.loads(sh(L, "simulate", model, row_probe, "--prompt", str(a.prompt), "--gen", str(a.gen),
                                "--weights", fmt, "--act", "f32", "--format", "json"))
            step_bytes = sim["decode_bytes"] / max(1, sim["decode_steps"])
            tpot = run["tpot_ms"] / 1e3
            prefill = run["prefill_ms"] / 1e3
            rows.append({
                "model": model, "weights": fmt,
                "decode_tok_s": run["decode_tokens_per_s"],
                "bw_frac": step_bytes / tpot / row_bw, "probe_gbs": row_bw / 1e9, "stable": stable,
                "prefill_tok_s": run["prefill_tokens_per_s"],
                "flops_frac": sim["prefill_flops"] / prefill / row_peak,
                "decode_ratio": run["decode_ms"] / run["predicted"]["decode_ms"],
                "prefill_ratio": run["prefill_ms"] / run["predicted"]["prefill_ms"],
                "cold_s": cold["jit"]["compile_s"], "cold_n": cold["jit"]["compiled"],
                "cached_s": run["jit"]["compile_s"], "cached_n": run["jit"]["cached"],
                "step_mb": step_bytes / 1e6,
            })
            r = rows[-1]
            print(f"{model:16s} {fmt:9s} decode {r['decode_tok_s']:7.1f} tok/s ({100*r['bw_frac']:.0f}% of BW), "
                  f"prefill {r['prefill_tok_s']:8.1f} tok/s ({100*r['flops_frac']:.0f}% of peak), "
                  f"measured/predicted decode {r['decode_ratio']:.2f} prefill {r['prefill_ratio']:.2f}",
                  flush=True)

    out = []
    w = out.append
    w("# CPU backend performance\n")
    w(f"Measured by `bench/cpu_bench.py` on {datetime.date.today().isoformat()}: {cpu}, {threads} threads, "
      f"{platform.system()} {platform.release()}. `lathe probe` (median of three; bandwidth probes gave "
      f"{bw_range[0]:.1f}, {bw_range[1]:.1f} and {bw_range[2]:.1f} GB/s on this shared host) measured **{bw/1e9:.1f} GB/s** "
      f"streaming read, **{peak/1e9:.0f} GFLOP/s** f32 FMA"
      + (f", **{fields['peak_tflops.int8']*1e3:.0f} GOP/s** 8-bit dot products" if fields.get("peak_tflops.int8") else "")
      + " and a BLAS GEMM efficiency of "
      f"**{fields['efficiency.gemm']:.2f}** (all threads). Prompt {a.prompt} tokens, {a.gen} generated, batch 1; "
      "synthetic weights. Each row is the better of two `lathe run --repeat 3` processes (kernels from the JIT "
      "cache; each reports the fastest of three passes, so no first-pass costs) beside "
      "`lathe simulate` on the probed target; predictions are uncalibrated. "
      + ("The host was probed again just before each row's runs, between its two run processes and after them; "
         "its bandwidth and f32 peak before the runs are that row's ceilings (column \"probe\"), and a row whose "
         "bandwidth, f32 peak or 8-bit dot-product peak moved by more than 15% in a later probe was measured "
         f"again ({retries} time{'s' if retries != 1 else ''} in this run).\n" if not a.no_probe_each else "Every row uses the median probe.\n"))
    w("| model | weights | probe | decode tok/s | bytes/step | achieved bandwidth | prefill tok/s | achieved FLOP/s (of f32 FMA peak) "
      "| decode measured/predicted | prefill measured/predicted | JIT cold | JIT cached |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        w(f"| {r['model']} | {r['weights']} | {r['probe_gbs']:.1f} GB/s{'' if r['stable'] else ' (moved)'} | {r['decode_tok_s']:.1f} | {r['step_mb']:.1f} MB | "
          f"{100*r['bw_frac']:.0f}% | {r['prefill_tok_s']:.0f} | {100*r['flops_frac']:.0f}% | "
          f"{r['decode_ratio']:.2f} | {r['prefill_ratio']:.2f} | {r['cold_s']:.2f} s ({r['cold_n']} kernels) | "
          f"{r['cached_s']:.3f} s ({r['cached_n']} loaded) |")
    w("")
    w("Achieved bandwidth is the simulator's minimum traffic of a decode step (weights at their stored width "
      "with scales, the KV cache read, activations) divided by the measured TPOT, as a fraction of the probed "
      "read bandwidth. Achieved FLOP/s is prefill's FLOPs over its measured time as a fraction of the f32 FMA "
      "peak; int4 prefill runs on 8-bit dot products, so its rows can exceed 100%. Goals (issue 5): >= 70% for f32 and int8, >= 60% for int4; measured vs simulated within "
      "25% per phase.")
    text = "\n".join(out) + "\n"
    with open(a.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
