// A llama-architecture GGUF as a lathe model: ModelSpec from the metadata, the
// mapping between lathe's weight names and llama.cpp's tensor names, and the weight
// formats that correspond to GGUF tensor types.
//
//   lathe weight              GGUF tensor                 lathe shape    GGUF ne
//   tok_embeddings            token_embd.weight           [V, H]         [H, V]
//   layers.N.attn_norm        blk.N.attn_norm.weight      [H]            [H]
//   layers.N.wq / wk / wv     blk.N.attn_q / attn_k / attn_v.weight
//   layers.N.wo               blk.N.attn_output.weight
//   layers.N.ffn_norm         blk.N.ffn_norm.weight
//   layers.N.w_gate/w_up/w_down  blk.N.ffn_gate / ffn_up / ffn_down.weight
//   layers.N.router           blk.N.ffn_gate_inp.weight   [E, H]         [H, E]
//   layers.N.experts.w_gate   blk.N.ffn_gate_exps.weight  [E, F, H]      [H, F, E]
//   layers.N.experts.w_up     blk.N.ffn_up_exps.weight
//   layers.N.experts.w_down   blk.N.ffn_down_exps.weight  [E, H, F]      [F, H, E]
//   norm                      output_norm.weight
//   lm_head                   output.weight (absent: tied to token_embd)
//
// Formats: F32 <-> f32, F16 <-> f16, BF16 <-> bf16, Q8_0 <-> int8:g32 (f16 scale per
// 32 values), Q4_0 <-> int4:g32 (value = (q - 8) x f16 scale; the same nibble order).
// Q/K rows need no permutation: lathe's RoPE rotates adjacent pairs, as llama.cpp's
// does for the llama architecture.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/gguf_file.h"
#include "ir/dtype.h"
#include "ir/model.h"

namespace lathe::gguf {

// True for a path that names a GGUF file: a .gguf extension, or a regular file that
// starts with the GGUF magic.
bool is_gguf_path(std::string_view path);

// The model described by the llama.<key> metadata (llama and mixtral-style MoE),
// cross-checked against the tensor shapes. Throws lathe::Error naming the file and key.
ModelSpec model_spec(const File& f);
// Opens `path` and reads its model (frontend's load_model uses this).
ModelSpec load_model_spec(const std::string& path);
// What the file asks for that lathe does not apply, one sentence each, for warnings:
// RoPE scaling of a type other than linear (yarn, longrope); linear scaling and
// Llama-3.1's rope_freqs.weight factors are applied (ModelSpec::rope_scaling).
std::vector<std::string> model_notes(const File& f);

// The weights a model needs: lathe name and lathe (row-major) shape, in file order.
struct WeightInfo {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<WeightInfo> model_weights(const ModelSpec& m);

// Throws "PATH: tensor 'X' (and N more) is not a weight of the model its metadata
// describes (WHAT...)" when the file holds a tensor outside `wanted` (GGUF names;
// rope_freqs.weight aside, read with the metadata): the metadata describes another
// model than the tensors hold (llama.block_count 1 over two layers' tensors).
void refuse_unwanted_tensors(const File& f, const std::set<std::string>& wanted, const std::string& what);

// The GGUF tensor name of a lathe weight, and back ("" when there is none).
std::string gguf_name(const std::string& lathe_name);
std::string lathe_name(const std::string& gguf_name);

// The weight format a GGUF tensor type loads into without conversion (nullopt for
// types lathe does not read), and the GGUF type that stores a format.
std::optional<Format> format_of(uint32_t ggml_type);
std::optional<uint32_t> ggml_type_of(const Format& f);

// The format the file's matrices are stored in (that of blk.0.attn_q.weight): a plan
// without --weights runs in it.
Format stored_weight_format(const File& f);
std::optional<Format> stored_weight_format(const std::string& path);

}  // namespace lathe::gguf
