#!/usr/bin/env python3
"""lathe against llama.cpp (llama-cpp-python) on GGUF files written by `lathe weights init`.

For each format (f32, q8_0, q4_0): lathe generates GEN greedy tokens after PROMPT and
writes the logits of every step (--logits); llama.cpp evaluates the same token path
with logits_all=True; the script reports the normalized error ||a - b|| / ||b|| per
position (max and overall) and whether the greedy continuations (llama.cpp generating
on its own) are identical.

With --write-fixture DIR it also writes the CI fixture: the f32 GGUF of the model,
llama.cpp's logits along lathe's path for each format (f32 little-endian rows), the
token paths, and llama.cpp's tokenization of a few strings with that file's
vocabulary and with a byte-level BPE (gpt2) vocabulary written here with the `gguf`
package. tests/gguf/parity_test.cpp checks lathe against these without the peer.

Needs: pip install llama-cpp-python gguf numpy tokenizers
Usage: bench/gguf_parity.py --lathe build/cli/lathe [--model tests/gguf/fixtures/micro.toml]
       [--write-fixture tests/gguf/fixtures]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

PROMPT = [1, 12, 17, 42, 99, 7, 250, 3]
TOKENIZE_TEXTS = [
    "hello world",
    "Hello World!",
    "  two  spaces",
    "the quick brown fox jumps over the lazy dog",
    "caf\u00e9 na\u00efve \u00fcber",
    "tab\tand\nnewline",
    "numbers 12345 and symbols #$%",
    "\u65e5\u672c\u8a9e",
    "I'LL DO IT, don't stop: 1234567 !wow\n\n  end",
    "a\r\n\tb   c\n",
]


def lathe_run(lathe, path, gen, threads, out_dir, tag):
    logits = os.path.join(out_dir, f"lathe-{tag}.bin")
    cmd = [lathe, "run", path, "--tokens", ",".join(map(str, PROMPT)), "--gen", str(gen),
           "--threads", str(threads), "--logits", logits, "--format", "json"]
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    j = json.loads(r.stdout)
    return j["tokens"], np.fromfile(logits, dtype=np.float32)


def llama_logits(llm, tokens):
    llm.reset()
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float32)


def llama_greedy(llm, prompt, gen):
    llm.reset()
    llm.eval(prompt)
    out = []
    for _ in range(gen):
        t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        out.append(t)
        llm.eval([t])
    return out



def vocab_only_writer(path):
    """A gguf.GGUFWriter with the llama metadata of a tiny vocabulary-only file."""
    import gguf
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(64)
    w.add_embedding_length(32)
    w.add_block_count(1)
    w.add_feed_forward_length(64)
    w.add_head_count(2)
    w.add_layer_norm_rms_eps(1e-5)
    return w


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

def bpe_vocab_file(path, pre):
    """A byte-level BPE vocabulary trained with `tokenizers`, stored as a vocab-only GGUF
    whose tokenizer.ggml.pre selects llama.cpp's pre-tokenizer (gpt-2 or llama-bpe)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [t for t in TOKENIZE_TEXTS] + [
        "the cat sat on the mat and the dog sat on the log",
        "hello there, general kenobi; hello world again and again",
        "numbers like 2024 and 1999 appear in text, as do words like there and where",
    ] * 20
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|begin|>", "<|end|>"], show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    d = json.loads(tok.to_str())
    vocab = d["model"]["vocab"]
    tokens = [None] * len(vocab)
    for s, i in vocab.items():
        tokens[i] = s
    merges = [m if isinstance(m, str) else " ".join(m) for m in d["model"]["merges"]]
    w = vocab_only_writer(path)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([3 if t.startswith("<|") else 1 for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    finish(w)


def spm_vocab_file(path):
    """A SentencePiece BPE vocabulary with byte fallback trained with `sentencepiece`,
    stored as a vocab-only llama GGUF the way llama.cpp's converter stores one."""
    import io
    import sentencepiece as spm

    corpus = (TOKENIZE_TEXTS + [
        "the cat sat on the mat and the dog sat on the log",
        "hello there, general kenobi; hello world again and again",
        "numbers like 2024 and 1999 appear in text, as do words like there and where",
        "quick brown foxes jump over lazy dogs while the world watches",
    ]) * 30
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=model, vocab_size=450,
                                   model_type="bpe", byte_fallback=True, character_coverage=1.0,
                                   unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 1)
    w = vocab_only_writer(path)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    finish(w)
    return sp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lathe", default="build/cli/lathe")
    ap.add_argument("--model", default="tests/gguf/fixtures/micro.toml")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--formats", default="f32,q8_0,q4_0")
    ap.add_argument("--write-fixture", default="")
    a = ap.parse_args()
    from llama_cpp import Llama, __version__ as llama_version

    out = tempfile.mkdtemp(prefix="lathe-parity-")
    fixture = {"llama_cpp_python": llama_version, "prompt": PROMPT, "seed": a.seed, "gen": a.gen, "formats": {}}
    rows_out = []
    for fmt in a.formats.split(","):
        path = os.path.join(out, f"model-{fmt}.gguf")
        subprocess.run([a.lathe, "weights", "init", a.model, "--seed", str(a.seed), "--weights", fmt, "-o", path],
                       check=True, capture_output=True)
        tokens, lathe_flat = lathe_run(a.lathe, path, a.gen, a.threads, out, fmt)
        # F32 KV cache: llama.cpp defaults to F16, which alone costs ~1e-3 relative error.
        llm = Llama(model_path=path, n_ctx=128, logits_all=True, n_threads=a.threads, n_batch=128,
                    type_k=0, type_v=0, verbose=False)
        vocab = llm.n_vocab()
        lathe_rows = lathe_flat.reshape(-1, vocab)
        path_tokens = PROMPT + tokens[:-1]
        ref = llama_logits(llm, path_tokens)[len(PROMPT) - 1:]
        assert ref.shape == lathe_rows.shape, (ref.shape, lathe_rows.shape)
        err = np.linalg.norm(lathe_rows - ref, axis=1) / np.linalg.norm(ref, axis=1)
        total = float(np.linalg.norm(lathe_rows - ref) / np.linalg.norm(ref))
        greedy = llama_greedy(llm, PROMPT, a.gen)
        same = greedy == tokens
        first_diff = next((i for i, (x, y) in enumerate(zip(greedy, tokens)) if x != y), None)
        rows_out.append((fmt, float(err.max()), total, same, first_diff))
        fixture["formats"][fmt] = {"lathe_tokens": tokens, "llama_cpp_greedy": greedy,
                                   "max_row_error": float(err.max()), "total_error": total}
        if a.write_fixture:
            ref.astype("<f4").tofile(os.path.join(a.write_fixture, f"llamacpp-logits-{fmt}.bin"))
            if fmt == "f32":
                with open(path, "rb") as src, open(os.path.join(a.write_fixture, "micro-f32.gguf"), "wb") as dst:
                    dst.write(src.read())
        del llm

    print(f"llama-cpp-python {llama_version}; model {a.model}, seed {a.seed}, prompt {len(PROMPT)} tokens, "
          f"{a.gen} generated, {a.threads} threads")
    print(f"{'format':8} {'max row error':>14} {'total error':>12}  greedy {a.gen} identical")
    for fmt, mx, tot, same, fd in rows_out:
        print(f"{fmt:8} {mx:14.3e} {tot:12.3e}  {'yes' if same else f'no (first difference at {fd})'}")

    if a.write_fixture:
        bpe_vocab_file(os.path.join(a.write_fixture, "bpe-vocab.gguf"), "gpt-2")
        bpe_vocab_file(os.path.join(a.write_fixture, "bpe-llama3-vocab.gguf"), "llama-bpe")
        sp = spm_vocab_file(os.path.join(a.write_fixture, "spm-vocab.gguf"))
        for t in TOKENIZE_TEXTS:  # llama.cpp's SPM tokenizer agrees with sentencepiece itself
            print("sentencepiece", repr(t), sp.encode(t))
        lines = ["# vocab file\ttext (\\xNN escapes)\tllama.cpp token ids (no BOS); written by bench/gguf_parity.py"]
        for vf in ["micro-f32.gguf", "spm-vocab.gguf", "bpe-vocab.gguf", "bpe-llama3-vocab.gguf"]:
            llm = Llama(model_path=os.path.join(a.write_fixture, vf), vocab_only=True, verbose=False)
            for t in TOKENIZE_TEXTS:
                ids = llm.tokenize(t.encode(), add_bos=False, special=False)
                esc = "".join(c if 32 <= ord(c) < 127 and c != "\\" else "".join(f"\\x{b:02x}" for b in c.encode())
                              for c in t)
                lines.append(f"{vf}\t{esc}\t{','.join(map(str, ids))}")
            del llm
        with open(os.path.join(a.write_fixture, "tokenize.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(a.write_fixture, "parity.json"), "w") as f:
            json.dump(fixture, f, indent=1)
        print(f"fixture written to {a.write_fixture}")


if __name__ == "__main__":
    sys.exit(main())
