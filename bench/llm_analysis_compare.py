#!/usr/bin/env python3
"""lathe beside llm-analysis (PyPI `llm-analysis`) on the same configurations.

Both tools run the same 48 configurations (Llama-2-7B and Llama-3-8B on A100-80GB and
H100-SXM, bf16 / int8 / int4 weights, batch 1 and 16, prompt 512 and 2048, 128
generated tokens) with aligned efficiency settings: llm-analysis with
flops_efficiency = hbm_memory_efficiency = 1, lathe with `ideal = true` (pure
roofline: efficiencies 1, no launch overhead), the same peak TFLOP/s and bandwidth.

It reports
  - time per configuration: llm-analysis's `inference()` call (median of 3, logging
    off) against lathe's (a) whole `lathe sweep` command on one thread divided by the
    configurations, (b) costing time per plan once the plan shapes are lowered, in
    that one cold pass, and (c) the same costing warm, as llm-analysis's repeated call
    is: build/bench/sim_bench's BM_SweepFileCosting (25 passes over the same sweep
    file in one process, mean per pass), when sim_bench is built beside the binary;
  - TTFT, TPOT, weight and KV memory side by side, with the ratio, and for TTFT and
    TPOT the llm-analysis figure with its known modelling differences replaced by
    lathe's (see docs/performance.md), which should then agree within a few percent.

Usage (llm-analysis in a virtual environment):
  python3 -m venv /tmp/llmvenv && /tmp/llmvenv/bin/pip install llm-analysis
  /tmp/llmvenv/bin/python bench/llm_analysis_compare.py build/cli/lathe
"""
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
from llm_analysis.logger import logger as la_logger

LATHE = sys.argv[1] if len(sys.argv) > 1 else "build/cli/lathe"

# The models as lathe's specs give them (REFERENCE.md sizes).
MODELS = {
    "llama-2-7b": dict(layers=32, hidden=4096, heads=32, kv_heads=32, ffn=11008, vocab=32000, ctx=4096),
    "llama-3-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, ctx=8192),
}
# lathe target -> llm-analysis GPU config (the same peak and bandwidth).
GPUS = {
    "a100-80g": GPUConfig(name="a100-sxm-80gb", mem_per_GPU_in_GB=80, hbm_bandwidth_in_GB_per_sec=2039,
                          intra_node_bandwidth_in_GB_per_sec=300, intra_node_min_message_latency=8e-06,
                          peak_fp16_TFLOPS=312, peak_i8_TFLOPS=624, peak_i4_TFLOPS=1248),
    "h100-sxm": GPUConfig(name="h100-sxm-80gb", mem_per_GPU_in_GB=80, hbm_bandwidth_in_GB_per_sec=3350,
                          intra_node_bandwidth_in_GB_per_sec=450, intra_node_min_message_latency=8e-06,
                          peak_fp16_TFLOPS=989, peak_i8_TFLOPS=1979, peak_i4_TFLOPS=3958),
}
WEIGHTS = {"bf16": 16, "int8": 8, "int4:g128": 4}
BATCH = [1, 16]
PROMPT = [512, 2048]
GEN = 128


def la_model(name):
    m = MODELS[name]
    # llm-analysis counts a two-matrix MLP (2 x hidden x ffn parameters): a SwiGLU MLP
    # of three matrices has the parameters of a two-matrix one 1.5x as wide.
    return ModelConfig(name=name, num_layers=m["layers"], n_head=m["heads"], hidden_dim=m["hidden"],
                       vocab_size=m["vocab"], max_seq_len=m["ctx"], num_key_value_heads=m["kv_heads"],
                       ffn_embed_dim=int(1.5 * m["ffn"]), expansion_ratio=1.5 * m["ffn"] / m["hidden"],
                       model_type="llama")


def run_llm_analysis(model, gpu, weights, batch, prompt):
    bits = WEIGHTS[weights]
    a = LLMAnalysis(la_model(model), GPUS[gpu], DtypeConfig(name=f"w{bits}a16e16", weight_bits=bits,
                                                             activation_bits=16, embedding_bits=16),
                    ParallelismConfig(), flops_efficiency=1.0, hbm_memory_efficiency=1.0)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = a.inference(batch_size_per_gpu=batch, seq_len=prompt, num_tokens_to_generate=GEN,
                        layernorm_dtype_bytes=2, kv_cache_dtype_bytes=2)
        times.append(time.perf_counter() - t0)
    return r, statistics.median(times)


def lathe_flops_prefill(model, batch, prompt):
    """Prefill FLOPs as lathe counts them (docs/simulator.md), without --ideal's tile waste."""
    m = MODELS[model]
    h, d = m["hidden"], m["hidden"] // m["heads"]
    kv = m["kv_heads"] * d
    tokens = batch * prompt
    linear = 2 * tokens * (h * (h + 2 * kv) + h * h + 3 * h * m["ffn"])
    attn = 4 * batch * m["heads"] * d * (prompt * (prompt + 1) / 2)
    return m["layers"] * (linear + attn) + 2 * batch * h * m["vocab"]  # LM head: last row of each sequence


def la_model_params(model):
    """Parameters of one layer's matrices (attention + the 3-matrix MLP)."""
    m = MODELS[model]
    h, kv = m["hidden"], m["kv_heads"] * (m["hidden"] // m["heads"])
    return 2 * h * h + 2 * h * kv + 3 * h * m["ffn"]


def kv_bytes_per_token(model):
    m = MODELS[model]
    return 2 * m["layers"] * m["kv_heads"] * (m["hidden"] // m["heads"]) * 2  # K and V, bf16


def main():
    logging.disable(logging.CRITICAL)
    la_logger.setLevel(logging.CRITICAL)
    configs = [(m, g, w, b, p) for m in MODELS for g in GPUS for w in WEIGHTS for b in BATCH for p in PROMPT]

    # ---- lathe: one sweep over the same configurations ----
    tmp = tempfile.mkdtemp()
    sweep = os.path.join(tmp, "compare.toml")
    with open(sweep, "w") as f:
        f.write("[sweep]\nname = \"llm-analysis-compare\"\nideal = true\n")
        f.write(f"models = {json.dumps(list(MODELS))}\nhardware = {json.dumps(list(GPUS))}\n")
        f.write(f"weights = {json.dumps(list(WEIGHTS))}\nkv = [\"bf16\"]\nbatch = {BATCH}\nprompt = {PROMPT}\n")
        f.write(f"gen = {GEN}\nobjectives = [\"min tpot_ms\"]\n[sweep.constraints]\nfits = false\n")
    rows_path = os.path.join(tmp, "rows.jsonl")
    walls, costs = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        out = subprocess.run([LATHE, "sweep", sweep, "-o", rows_path, "--threads", "1", "--format", "json"],
                             check=True, capture_output=True, text=True).stdout
        walls.append(time.perf_counter() - t0)
        s = json.loads(out)
        costs.append(s["cost_s"] / s["evaluated"])
    rows = {}
    for line in open(rows_path):
        r = json.loads(line)
        rows[(r["model"], r["hardware"], r["weights"], r["batch"], r["prompt"])] = r
    assert len(rows) == len(configs), (len(rows), len(configs))
    lathe_per_config = statistics.median(walls) / len(configs)
    lathe_per_plan = statistics.median(costs)

    # ---- llm-analysis, config by config ----
    table, la_times = [], []
    ratios = {"ttft": [], "tpot": [], "weights": [], "kv": [], "ttft_adj": [], "tpot_adj": [], "weights_adj": []}
    for cfg in configs:
        model, gpu, weights, batch, prompt = cfg
        la, secs = run_llm_analysis(*cfg)
        la_times.append(secs)
        r = rows[(model, gpu, weights if weights != "bf16" else "bf16", batch, prompt)]
        bw = GPUS[gpu].hbm_bandwidth_in_GB_per_sec * 1e9
        # TPOT: llm-analysis moves the whole final-context KV cache twice per step (load
        # and store); lathe reads each step's context once and writes one token.
        kvb = batch * kv_bytes_per_token(model)
        la_kv = la["kv_cache_latency"]
        lathe_kv = (kvb * (prompt + 1 + (GEN - 1) / 2) + kvb) / bw
        # It also streams the whole (bf16) embedding table each step where lathe reads the
        # LM head in the weight format, and counts no quantization scales.
        m = MODELS[model]
        bits = WEIGHTS[weights]
        eff_bits = {16: 16.0, 8: 8.0 + 16.0 / m["hidden"], 4: 4.0 + 16.0 / 128}[bits]
        lm_params = m["vocab"] * m["hidden"]
        layer_params = m["layers"] * (la_model_params(model))
        extra_bytes = lm_params * eff_bits / 8 + layer_params * (eff_bits - bits) / 8
        tpot_adj = (la["decode_latency"] - la_kv + lathe_kv - lm_params * 2 / bw + extra_bytes / bw) * 1e3
        weights_adj = (la["weight_memory_per_gpu"] + extra_bytes) / 1e9
        # TTFT: compute-bound; llm-analysis counts 16 h^2 MLP FLOPs per token whatever the
        # FFN width, attention without the causal mask, and the LM head on every row.
        ttft_adj = la["prefill_latency"] * lathe_flops_prefill(model, batch, prompt) / la["prefill_num_flops_fwd_total"] * 1e3
        vals = {
            "ttft": (r["ttft_ms"], la["prefill_latency"] * 1e3),
            "tpot": (r["tpot_ms"], la["decode_latency"] * 1e3),
            "weights": (r["weights_gb"], la["weight_memory_per_gpu"] / 1e9),
            "kv": (r["kv_gb"], la["kv_cache_memory_per_gpu"] / 1e9),
        }
        for k, (a, b) in vals.items():
            ratios[k].append(a / b)
        ratios["ttft_adj"].append(r["ttft_ms"] / ttft_adj)
        ratios["tpot_adj"].append(r["tpot_ms"] / tpot_adj)
        ratios["weights_adj"].append(r["weights_gb"] / weights_adj)
        table.append((cfg, vals, ttft_adj, tpot_adj, secs))

    la_per_config = statistics.median(la_times)
    # (c) warm costing: the same sweep file costed 25 times in one process.
    sim_bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(LATHE))), "bench", "sim_bench")
    lathe_warm = None
    if os.path.exists(sim_bench):
        out = subprocess.run([sim_bench, "--benchmark_filter=BM_SweepFileCosting", "--benchmark_format=json"],
                             check=True, capture_output=True, text=True, env=dict(os.environ, LATHE_BENCH_SWEEP=sweep)).stdout
        bs = {b["name"].split("/")[1]: b for b in json.loads(out)["benchmarks"]}
        for b in bs.values():
            assert b["time_unit"] == "us" and int(b["plans"]) == len(configs), b
        lathe_warm = bs["1"]["real_time"] * 1e-6 / bs["1"]["plans"]
        lathe_warm_norows = bs["0"]["real_time"] * 1e-6 / bs["0"]["plans"]
    # One configuration per process, as a command line runs it: Python start, import,
    # one inference() call; `lathe simulate` for the same configuration.
    one = ("import logging; logging.disable(logging.CRITICAL)\n"
           "from llm_analysis.analysis import LLMAnalysis\n"
           "from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig\n"
           "m = ModelConfig(name='llama-3-8b', num_layers=32, n_head=32, hidden_dim=4096, vocab_size=128256,"
           " max_seq_len=8192, num_key_value_heads=8, ffn_embed_dim=21504, expansion_ratio=5.25)\n"
           "g = GPUConfig(name='a100', mem_per_GPU_in_GB=80, hbm_bandwidth_in_GB_per_sec=2039,"
           " intra_node_bandwidth_in_GB_per_sec=300, intra_node_min_message_latency=8e-6, peak_fp16_TFLOPS=312)\n"
           "LLMAnalysis(m, g, DtypeConfig(), ParallelismConfig(), flops_efficiency=1, hbm_memory_efficiency=1)"
           ".inference(batch_size_per_gpu=1, seq_len=512, num_tokens_to_generate=128)\n")
    la_proc, lathe_proc = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", one], check=True, capture_output=True)
        la_proc.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([LATHE, "simulate", "llama-3-8b", "a100-80g", "--batch", "1", "--prompt", "512", "--gen", "128",
                        "--ideal", "--format", "json"], check=True, capture_output=True)
        lathe_proc.append(time.perf_counter() - t0)
    la_proc_t, lathe_proc_t = statistics.median(la_proc), statistics.median(lathe_proc)
    print(f"# lathe vs llm-analysis {__import__('importlib.metadata').metadata.version('llm-analysis')}: "
          f"{len(configs)} configurations\n")
    print("| | per configuration | lathe speed-up |")
    print("|---|---:|---:|")
    print(f"| llm-analysis `inference()` (median) | {la_per_config * 1e3:.3f} ms | |")
    print(f"| lathe sweep, whole command / configurations (1 thread) | {lathe_per_config * 1e3:.3f} ms | "
          f"{la_per_config / lathe_per_config:.2g}x |")
    print(f"| lathe sweep, costing per plan once lowered (1 thread) | {lathe_per_plan * 1e6:.1f} us | "
          f"{la_per_config / lathe_per_plan:.2g}x |")
    if lathe_warm:
        print(f"| lathe, the same costing warm (25 passes in one process, mean) | {lathe_warm * 1e6:.1f} us | "
              f"{la_per_config / lathe_warm:.2g}x |")
        print(f"| lathe, the same warm without writing rows (figures in memory, as the call returns a dict) | "
              f"{lathe_warm_norows * 1e6:.1f} us | {la_per_config / lathe_warm_norows:.2g}x |")
    print(f"| llm-analysis, one configuration per process (Python start + import + call) | {la_proc_t * 1e3:.0f} ms | |")
    print(f"| `lathe simulate`, one configuration per process | {lathe_proc_t * 1e3:.1f} ms | "
          f"{la_proc_t / lathe_proc_t:.2g}x |")
    print(f"| llm-analysis process per configuration vs lathe sweep per plan | | "
          f"{la_proc_t / lathe_per_plan:.0f}x |")
    print()

    def rng(k):
        v = ratios[k]
        return f"{min(v):.3f} / {statistics.median(v):.3f} / {max(v):.3f}"

    print("| figure | lathe / llm-analysis (min / median / max) | after replacing llm-analysis's known differences |")
    print("|---|---|---|")
    print(f"| TTFT (prefill) | {rng('ttft')} | {rng('ttft_adj')} |")
    print(f"| TPOT (one decode step) | {rng('tpot')} | {rng('tpot_adj')} |")
    print(f"| weight memory | {rng('weights')} | {rng('weights_adj')} |")
    print(f"| KV-cache memory | {rng('kv')} | |")
    print()
    print("| model | GPU | weights | batch | prompt | TTFT lathe | TTFT l-a | adj | TPOT lathe | TPOT l-a | adj | "
          "weights GB lathe | l-a | KV GB lathe | l-a |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cfg, vals, ttft_adj, tpot_adj, secs in table:
        m, g, w, b, p = cfg
        print(f"| {m} | {g} | {w} | {b} | {p} | {vals['ttft'][0]:.2f} | {vals['ttft'][1]:.2f} | {ttft_adj:.2f} | "
              f"{vals['tpot'][0]:.3f} | {vals['tpot'][1]:.3f} | {tpot_adj:.3f} | {vals['weights'][0]:.2f} | "
              f"{vals['weights'][1]:.2f} | {vals['kv'][0]:.3f} | {vals['kv'][1]:.3f} |")


if __name__ == "__main__":
    main()
