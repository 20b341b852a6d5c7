#!/usr/bin/env python3
"""Parity of lathe with Hugging Face transformers on tiny random checkpoints.

Writes (or, with --check, verifies against lathe) the fixtures that
tests/runtime/hf_checkpoint_test.cpp reads without Python:

  tests/fixtures/hf/tiny-llama/    LlamaForCausalLM, F32 weights, sharded over two
                                   files with model.safetensors.index.json
  tests/fixtures/hf/tiny-mixtral/  MixtralForCausalLM, BF16 weights, tied embeddings
  tests/fixtures/hf/tiny-llama31/  LlamaForCausalLM with Llama 3.1's "llama3" RoPE scaling
                                   (original context 32, so the prompt's positions
                                   already turn the scaled and blended pairs), F32

Each holds config.json, the safetensors weights and reference_logits.json: a fixed
prompt, three fixed decode tokens, and the logits transformers computes in float32
for the last prompt position and after each decode token (one forward pass over the
whole sequence with its causal mask: the same numbers a KV cache must reproduce).

Weights are seeded random (torch.manual_seed), drawn with a spread that keeps
activations O(1), so attention, RoPE and the router are exercised rather than
washed out: matrices N(0, 1/in), embeddings N(0, 1), norm gains 1 + N(0, 0.1^2).
Mixtral's weights are rounded to bf16 before transformers runs, so lathe (reading
BF16 into f32) and transformers compute with identical values.

  python3 bench/hf_parity.py                 # regenerate the fixtures
  python3 bench/hf_parity.py --check build/cli/lathe
        # also run `lathe run DIR --tokens ... --format json` and compare the greedy
        # tokens (the C++ test compares the logits)

Needs torch, transformers, safetensors (pip install torch transformers safetensors).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "hf")

PROMPT = [17, 203, 5, 88, 141, 9, 250, 33, 64, 120]
DECODE = [77, 3, 199]


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() == 1:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)


def state_dict_classic(model, arch):
    """The checkpoint's tensors under the names published checkpoints use (Mixtral:
    block_sparse_moe.gate and experts.E.w1/w2/w3), whatever this transformers
    version calls its modules."""
    sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    if arch != "mixtral":
        return sd
    out = {}
    for k, v in sd.items():
        if ".mlp.experts.gate_up_proj" in k:  # transformers 5: fused [E, 2F, H]
            pre = k.split(".mlp.experts.")[0]
            f = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{pre}.block_sparse_moe.experts.{e}.w1.weight"] = v[e, :f].contiguous()
                out[f"{pre}.block_sparse_moe.experts.{e}.w3.weight"] = v[e, f:].contiguous()
        elif ".mlp.experts.down_proj" in k:  # transformers 5: [E, H, F]
            pre = k.split(".mlp.experts.")[0]
            for e in range(v.shape[0]):
                out[f"{pre}.block_sparse_moe.experts.{e}.w2.weight"] = v[e].contiguous()
        elif ".mlp.gate.weight" in k:
            out[k.replace(".mlp.gate.", ".block_sparse_moe.gate.")] = v
        else:
            out[k] = v
    return out


def make(name, arch, config, seed, dtype, shards):
    torch.manual_seed(seed)
    cls = {"llama": transformers.LlamaForCausalLM, "mixtral": transformers.MixtralForCausalLM}[arch]
    model = cls(config).to(torch.float32).eval()
    randomize(model, seed)
    if dtype == torch.bfloat16:  # compute with exactly the values the file holds
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    tokens = torch.tensor([PROMPT + DECODE])
    with torch.no_grad():
        logits = model(tokens).logits[0].float()
    rows = [logits[len(PROMPT) - 1 + i].tolist() for i in range(len(DECODE) + 1)]

    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    cfg = config.to_dict()
    cfg["architectures"] = [cls.__name__]
    cfg["torch_dtype"] = {torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype]
    cfg.pop("dtype", None)
    cfg["_name_or_path"] = name
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    sd = {k: v.to(dtype) for k, v in state_dict_classic(model, arch).items()}
    names = sorted(sd)
    if shards == 1:
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    else:
        per = (len(names) + shards - 1) // shards
        weight_map, total = {}, 0
        for s in range(shards):
            part = names[s * per:(s + 1) * per]
            fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            save_file({k: sd[k] for k in part}, os.path.join(d, fn), metadata={"format": "pt"})
            for k in part:
                weight_map[k] = fn
                total += sd[k].numel() * sd[k].element_size()
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
            f.write("\n")
    ref = {
        "generator": "bench/hf_parity.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "seed": seed,
        "prompt": PROMPT,
        "decode": DECODE,
        "logits": [[float(f"{x:.9g}") for x in r] for r in rows],
    }
    with open(os.path.join(d, "reference_logits.json"), "w") as f:
        json.dump(ref, f)
        f.write("\n")
    # The files must be a checkpoint transformers itself loads to the same logits.
    again = cls.from_pretrained(d, dtype=torch.float32).eval()
    with torch.no_grad():
        reloaded = again(tokens).logits[0].float()
    err = float((reloaded - logits).norm() / logits.norm())
    if err > 1e-6:
        sys.exit(f"{d}: transformers reloads the checkpoint with normalized error {err}")
    size = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))
    print(f"wrote {d}: {len(sd)} tensors, {size / 1024:.0f} KiB; greedy after prompt: {max(range(len(rows[0])), key=rows[0].__getitem__)}")
    return d, rows


def check_with_lathe(lathe, d, rows):
    tokens = ",".join(map(str, PROMPT))
    r = subprocess.run([lathe, "run", d, "--tokens", tokens, "--gen", "4", "--weights", "f32", "--kv", "f32",
                        "--format", "json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"lathe run {d} failed:\n{r.stderr}")
    got = json.loads(r.stdout)["tokens"]
    want = [max(range(len(rows[0])), key=rows[0].__getitem__)]
    print(f"{os.path.basename(d)}: lathe greedy first token {got[0]}, transformers {want[0]}")
    if got[0] != want[0]:
        sys.exit("greedy tokens differ")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="LATHE", help="path of the lathe binary to compare greedy tokens with")
    a = ap.parse_args()
    torch.set_num_threads(1)
    common = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                  max_position_embeddings=128, rms_norm_eps=1e-5, hidden_act="silu")
    llama = transformers.LlamaConfig(intermediate_size=128, rope_theta=10000.0, tie_word_embeddings=False, **common)
    mixtral = transformers.MixtralConfig(intermediate_size=64, num_local_experts=4, num_experts_per_tok=2,
                                         rope_theta=1e6, tie_word_embeddings=True, sliding_window=None, **common)
    llama31 = transformers.LlamaConfig(intermediate_size=128, tie_word_embeddings=False,
                                       rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                        "original_max_position_embeddings": 32},
                                       **common)
    out = [make("tiny-llama", "llama", llama, 1234, torch.float32, 2),
           make("tiny-mixtral", "mixtral", mixtral, 4321, torch.bfloat16, 1),
           make("tiny-llama31", "llama", llama31, 3141, torch.float32, 1)]
    if a.check:
        for d, rows in out:
            check_with_lathe(a.check, d, rows)


if __name__ == "__main__":
    main()
